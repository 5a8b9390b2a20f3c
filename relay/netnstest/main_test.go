package netnstest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

const (
	// endpointEnv, when set, makes the test binary an endpoint process:
	// its value is the JSON endpointSpec (see doc.go).
	endpointEnv = "NETNSTEST_ENDPOINT"

	// requireEnv, when set, turns the netns tests' skips (not root, no
	// ip or nft, namespaces unusable) into failures.
	requireEnv = "NETNSTEST_REQUIRE"

	// relayPackage is the relay binary's import path.
	relayPackage = "github.com/urbit-relay/relay/cmd/relay"

	// buildTimeout bounds `go build` of the relay; a -race build from a
	// cold cache takes about a minute on the 2-core development machine.
	buildTimeout = 5 * time.Minute
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(endpointEnv); spec != "" {
		os.Exit(runEndpointProcess(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	code := m.Run()
	builds.remove()
	os.Exit(code)
}

// relayBuilds builds the relay binary at most once per test process and
// flavour (plain or -race), into a directory removed when the tests end.
// It is the package's only shared state: a build cache, guarded by mu.
type relayBuilds struct {
	mu   sync.Mutex
	dir  string
	bins map[bool]string // race → path
	errs map[bool]error
}

var builds = &relayBuilds{bins: map[bool]string{}, errs: map[bool]error{}}

// relayBinary returns the path of a relay binary built from this module's
// ./cmd/relay, with the race detector when race is set. A build failure
// fails the test: the tree does not build.
func relayBinary(t testing.TB, race bool) string {
	t.Helper()
	bin, err := builds.get(race)
	if err != nil {
		t.Fatalf("building the relay: %v", err)
	}
	return bin
}

func (b *relayBuilds) get(race bool) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bin, ok := b.bins[race]; ok {
		return bin, nil
	}
	if err, ok := b.errs[race]; ok {
		return "", err
	}
	bin, err := b.build(race)
	if err != nil {
		b.errs[race] = err
		return "", err
	}
	b.bins[race] = bin
	return bin, nil
}

func (b *relayBuilds) build(race bool) (string, error) {
	if b.dir == "" {
		dir, err := os.MkdirTemp("", "netnstest-relay-")
		if err != nil {
			return "", err
		}
		b.dir = dir
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goTool = filepath.Join(root, "bin", "go")
		} else {
			return "", fmt.Errorf("no go tool on PATH: %w", err)
		}
	}
	bin := filepath.Join(b.dir, "relay")
	args := []string{"build", "-o", bin}
	if race {
		bin += "-race"
		args = []string{"build", "-race", "-o", bin}
	}
	args = append(args, relayPackage)
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	return bin, nil
}

func (b *relayBuilds) remove() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// skipOrFail skips the test with a message saying what is missing, or fails
// it when NETNSTEST_REQUIRE is set.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(requireEnv) != "" {
		t.Fatalf("%s (%s is set, so this fails instead of skipping)", msg, requireEnv)
	}
	t.Skip(msg)
}
