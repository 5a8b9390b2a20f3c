package route

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// goList runs `go list args...` and returns its output; a test that cannot
// list the packages fails (a skip would pass a layering it never checked).
func goList(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestLayering: the routing rules import neither the relay nor the
// endpoint, and the endpoint does not import the relay: both sides of the
// wire build on this package, not on each other.
func TestLayering(t *testing.T) {
	for pkg, forbidden := range map[string][]string{
		"github.com/urbit-relay/relay/relay/route": {"github.com/urbit-relay/relay/relay", "github.com/urbit-relay/relay/endpoint"},
		"github.com/urbit-relay/relay/endpoint":    {"github.com/urbit-relay/relay/relay"},
	} {
		deps := strings.Fields(goList(t, "-deps", pkg))
		if !slices.Contains(deps, pkg) {
			t.Fatalf("go list -deps %s did not list %s itself: %q", pkg, pkg, deps)
		}
		for _, f := range forbidden {
			for _, d := range deps {
				if d == f {
					t.Errorf("%s imports %s", pkg, f)
				}
			}
		}
	}
}

// TestInternalSplit: internal/ holds two kinds of package. Those directly
// under internal/ (hist, eventq, svgchart) are libraries the core imports,
// so they import nothing of this module but each other: nothing the relay
// imports may import the relay. Those under internal/harness/ (seednet,
// vtool, dissector) drive the relay, so only tests and cmd/ import them.
// The test doubles (transporttest's MemNetwork and NewPipe, pkitest's
// NewSignedPage) are imported by tests alone: no package's non-test files
// import them.
func TestInternalSplit(t *testing.T) {
	const mod = "github.com/urbit-relay/relay"
	out := goList(t, "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", mod+"/...")
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pkg, deps, _ := strings.Cut(line, "\t")
		imports[pkg] = strings.Fields(deps)
	}
	isHarness := func(p string) bool { return strings.HasPrefix(p, mod+"/internal/harness/") }
	isLib := func(p string) bool { return strings.HasPrefix(p, mod+"/internal/") && !isHarness(p) }
	testOnly := []string{mod + "/relay/transport/transporttest", mod + "/relay/pki/pkitest"}
	for _, want := range append([]string{mod + "/relay", mod + "/internal/hist", mod + "/internal/harness/seednet"}, testOnly...) {
		if _, ok := imports[want]; !ok {
			t.Fatalf("go list did not list %s:\n%s", want, out)
		}
	}
	for pkg, deps := range imports {
		for _, d := range deps {
			if !strings.HasPrefix(d, mod+"/") && d != mod {
				continue
			}
			if isLib(pkg) && !isLib(d) {
				t.Errorf("%s is imported by the core but imports %s (only other internal/ libraries)", pkg, d)
			}
			if isHarness(d) && !isHarness(pkg) && !strings.HasPrefix(pkg, mod+"/cmd/") {
				t.Errorf("%s imports the harness %s outside a test (only tests and cmd/ may)", pkg, d)
			}
			if slices.Contains(testOnly, d) {
				t.Errorf("%s imports the test doubles %s outside a test (only tests may)", pkg, d)
			}
		}
	}
}
