package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/urbit-relay/relay/internal/harness/vtool"
	"github.com/urbit-relay/relay/scry"
)

// moduleRoot is the repository root, where the Dockerfile builds from.
const moduleRoot = "../.."

// dockerfile is the Dockerfile's instructions, continuation lines joined.
func dockerfile(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(moduleRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// skipUnlessImageBuild skips a test that builds for the image (whose
// work is what) under -short or off linux.
func skipUnlessImageBuild(t *testing.T, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux")
	}
}

// TestDockerfileBuild runs the Dockerfile's go build command as the image
// build does (sh -c, from the module root, with the VERSION build arg in
// the environment), then checks the binary is static and carries the
// version. No Docker engine is needed.
func TestDockerfileBuild(t *testing.T) {
	skipUnlessImageBuild(t, "builds the binary")
	var build string
	for _, ins := range dockerfile(t) {
		if strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "go build") {
			build = strings.TrimPrefix(ins, "RUN ")
		}
	}
	const imageOut = "/out/relay"
	if build == "" || !strings.Contains(build, "-o "+imageOut+" ") || !strings.Contains(build, "CGO_ENABLED=0") {
		t.Fatalf("no RUN ... CGO_ENABLED=0 go build ... -o %s line in the Dockerfile (got %q)", imageOut, build)
	}
	bin := filepath.Join(t.TempDir(), "relay")
	cmd := exec.Command("sh", "-c", strings.Replace(build, "-o "+imageOut, "-o "+bin, 1))
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-dockertest", "REVISION=0123456789abcdef")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary is dynamically linked (%v): it would not run on distroless/static", p.Type)
		}
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"relay v0.0.0-dockertest\n", "revision 0123456789abcdef\n", "CGO_ENABLED=0\n", "-trimpath=true\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("relay version lacks %q:\n%s", want, out)
		}
	}
}

// TestDockerfileImage checks the base images, golang at go.mod's Go and
// distroless static:nonroot, each a build arg whose default is pinned by
// digest, and the final stage: a non-root
// user, the ports exposed, and a HEALTHCHECK that calls the binary's health
// subcommand on the port the entrypoint serves metrics on.
func TestDockerfileImage(t *testing.T) {
	ins := dockerfile(t)
	var froms []int
	for i, s := range ins {
		if strings.HasPrefix(s, "FROM ") {
			froms = append(froms, i)
		}
	}
	if len(froms) < 2 {
		t.Fatal("not a multi-stage build")
	}
	last := froms[len(froms)-1]
	final := ins[last:]
	// The base images are build args (the test passes stand-ins) whose
	// defaults, the release build's, are pinned by digest.
	args := map[string]string{}
	for _, s := range ins {
		if strings.HasPrefix(s, "FROM ") {
			break
		}
		if a, ok := strings.CutPrefix(s, "ARG "); ok {
			k, v, _ := strings.Cut(a, "=")
			args[k] = v
		}
	}
	from := func(s string) string {
		return os.Expand(strings.Fields(s)[1], func(k string) string { return args[k] })
	}
	if got := from(final[0]); !regexp.MustCompile(`^gcr\.io/distroless/static-debian\d+:nonroot@sha256:[0-9a-f]{64}$`).MatchString(got) {
		t.Errorf("final stage FROM %s: want distroless/static:nonroot pinned by digest", got)
	}
	gomod, err := os.ReadFile(filepath.Join(moduleRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goLine == nil {
		t.Fatal("no go line in go.mod")
	}
	if got := from(ins[froms[0]]); !regexp.MustCompile(`^golang:` + regexp.QuoteMeta(string(goLine[1])) + `@sha256:[0-9a-f]{64}$`).MatchString(got) {
		t.Errorf("build stage FROM %s: want golang:%s (go.mod's go) pinned by digest", got, goLine[1])
	}
	var user, expose, health, entry string
	for _, s := range final {
		verb, rest, _ := strings.Cut(s, " ")
		switch verb {
		case "USER":
			user = rest
		case "EXPOSE":
			expose = rest
		case "HEALTHCHECK":
			health = rest
		case "ENTRYPOINT":
			entry = rest
		}
	}
	if user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("USER %q: want a non-root user", user)
	}
	m := regexp.MustCompile(`"--metrics", "([0-9.]*):(\d+)"`).FindStringSubmatch(entry)
	if m == nil {
		t.Fatalf("ENTRYPOINT %q does not set --metrics", entry)
	}
	// Loopback: under --network host the metrics listener is the host's,
	// and must not be public unless the operator says so (issue 20).
	if m[1] != "127.0.0.1" {
		t.Errorf("ENTRYPOINT's --metrics on %s; want 127.0.0.1, which --network host does not expose", m[1])
	}
	port := m[2]
	if !strings.Contains(expose, "13337/udp") || !strings.Contains(expose, port+"/tcp") {
		t.Errorf("EXPOSE %q: want 13337/udp and %s/tcp", expose, port)
	}
	if !strings.Contains(health, `"/relay", "health", "--url", "http://127.0.0.1:`+port+`/healthz"`) {
		t.Errorf("HEALTHCHECK %q: want /relay health on the metrics port %s", health, port)
	}
	if !strings.Contains(defaultHealthURL, ":"+port+"/") {
		t.Errorf("relay health's default URL %s is not on the image's metrics port %s", defaultHealthURL, port)
	}
}

// The real image build. TestDockerImage builds the repository's Dockerfile,
// unchanged, with the repository root as its context (so .dockerignore
// applies), on a local Docker engine, then runs the image and checks what an
// operator relies on. No image can be pulled here, so the two base images
// are stand-ins this file makes locally and passes as the Dockerfile's
// GO_IMAGE and BASE_IMAGE build args; they are named relay-standin/... and
// labelled test-only, and an image built on them is never a release image.

const (
	// dockerBuildTimeout bounds the image build: the stand-ins' import and
	// a cold go build of cmd/relay inside the container.
	dockerBuildTimeout = 8 * time.Minute
	// dockerStartTimeout bounds the container's start, from docker run to
	// /readyz through the published port.
	dockerStartTimeout = 30 * time.Second
	// dockerHealthTimeout bounds the wait for the HEALTHCHECK's first
	// verdict: the image's --interval (30s) plus a margin.
	dockerHealthTimeout = 60 * time.Second
	// dockerStopLimit is how soon docker stop must return: the relay
	// drains and exits on SIGTERM, well before docker's 10 s kill.
	dockerStopLimit = 5 * time.Second
	// dockerStandinRecipe versions how the stand-ins are made: change it
	// when their contents change, so that cached ones are made anew.
	dockerStandinRecipe = "1"
	// dockerTestVersion and dockerTestRevision are the VERSION and
	// REVISION build args, checked in the binary and the image's labels.
	dockerTestVersion  = "v0.0.0-dockertest"
	dockerTestRevision = "0123456789abcdef0123456789abcdef01234567"
	// dockerImageSource is the image's org.opencontainers.image.source.
	dockerImageSource = "https://github.com/urbit-relay/relay"
)

// TestDockerignoreKeepsBuildInputs checks that .dockerignore leaves in the
// build context every file the image's go build reads: go.mod, go.sum, and
// each Go, assembly and embedded file of every module-local package
// `go list -deps ./cmd/relay` lists for the image's platform (linux,
// CGO_ENABLED=0). It reads .dockerignore with Docker's own parser and
// matcher. An excluded package (as session/ once was) fails it.
func TestDockerignoreKeepsBuildInputs(t *testing.T) {
	inputs := dockerBuildInputs(t)
	if !slices.ContainsFunc(inputs, func(s string) bool { return strings.HasPrefix(s, "session/") }) {
		t.Fatalf("go list found no session/ file among cmd/relay's inputs (the case the operator hit): %v", inputs)
	}
	pm := dockerignore(t, filepath.Join(moduleRoot, ".dockerignore"))
	for _, f := range inputs {
		excluded, err := pm.MatchesOrParentMatches(f)
		if err != nil {
			t.Fatal(err)
		}
		if excluded {
			t.Errorf(".dockerignore excludes %s, which the image's go build of ./cmd/relay needs", f)
		}
	}
}

// TestDockerignoreMatcher checks the check: .dockerignore patterns as
// Docker reads them exclude what the operator's broken file excluded, and
// keep what it should.
func TestDockerignoreMatcher(t *testing.T) {
	broken := filepath.Join(t.TempDir(), ".dockerignore")
	if err := os.WriteFile(broken, []byte("# comment\n.git\nsession\n**/testdata\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pm := dockerignore(t, broken)
	for f, want := range map[string]bool{
		"session/session.go":          true,
		"relay/testdata/x.bin":        true,
		"relay/relay.go":              false,
		"go.mod":                      false,
		"internal/session/session.go": false, // "session" is anchored at the root
	} {
		if got, err := pm.MatchesOrParentMatches(f); err != nil || got != want {
			t.Errorf("%s: excluded %v (%v), want %v", f, got, err, want)
		}
	}
}

// dockerignore parses a .dockerignore file with Docker's parser.
func dockerignore(t *testing.T, path string) *patternmatcher.PatternMatcher {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	patterns, err := ignorefile.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

// dockerBuildInputs lists, relative to the module root and slash-separated,
// the files the image's go build of ./cmd/relay reads from the module.
func dockerBuildInputs(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=Dir,Module,GoFiles,SFiles,HFiles,SysoFiles,EmbedFiles", "./cmd/relay")
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	inputs := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			Dir                                            string
			Module                                         *struct{ Main bool }
			GoFiles, SFiles, HFiles, SysoFiles, EmbedFiles []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || !p.Module.Main {
			continue
		}
		rel, err := filepath.Rel(root, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, files := range [][]string{p.GoFiles, p.SFiles, p.HFiles, p.SysoFiles, p.EmbedFiles} {
			for _, f := range files {
				inputs = append(inputs, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	return inputs
}

// TestDockerImage builds the real Dockerfile on stand-in base images and
// runs the image: the HEALTHCHECK turns healthy, the process runs as uid
// and gid 65532, the UDP port published on 127.0.0.1 answers a STUN binding
// request (seen in /metrics on the published metrics port), a config file
// replaced in the mounted directory is reloaded on docker kill -s HUP, the
// OCI labels carry VERSION and REVISION, and docker stop ends it promptly
// with exit code 0 and a clean-shutdown log. It skips where Docker is
// absent or its daemon unreachable, except under CI=true, where it fails.
func TestDockerImage(t *testing.T) {
	skipUnlessImageBuild(t, "builds and runs the container image")
	requireDocker(t)
	ctx, cancel := context.WithTimeout(context.Background(), dockerBuildTimeout+3*time.Minute)
	defer cancel()

	start := time.Now()
	goImage := goStandin(t, ctx)
	baseImage := distrolessStandin(t, ctx)
	t.Logf("stand-in base images %s and %s ready in %v", goImage, baseImage, time.Since(start).Round(time.Millisecond))
	image := "relay-dockertest:latest"
	start = time.Now()
	buildCtx, buildCancel := context.WithTimeout(ctx, dockerBuildTimeout)
	defer buildCancel()
	dockerRun(t, buildCtx, nil, "build", "--pull=false", "--force-rm",
		"--build-arg", "GO_IMAGE="+goImage, "--build-arg", "BASE_IMAGE="+baseImage,
		"--build-arg", "VERSION="+dockerTestVersion, "--build-arg", "REVISION="+dockerTestRevision,
		"-t", image, moduleRoot)
	t.Logf("docker build of the Dockerfile in %v", time.Since(start).Round(time.Millisecond))

	var cfg struct {
		Config struct {
			User        string
			Labels      map[string]string
			Healthcheck struct{ Test []string }
		}
	}
	if err := json.Unmarshal([]byte(dockerRun(t, ctx, nil, "image", "inspect", "--format", "{{json .}}", image)), &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  dockerTestVersion,
		"org.opencontainers.image.revision": dockerTestRevision,
		"org.opencontainers.image.source":   dockerImageSource,
	} {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if cfg.Config.User != "nonroot:nonroot" {
		t.Errorf("image user %q, want nonroot:nonroot", cfg.Config.User)
	}
	if want := []string{"CMD", "/relay", "health", "--url", "http://127.0.0.1:9337/healthz"}; !slices.Equal(cfg.Config.Healthcheck.Test, want) {
		t.Errorf("HEALTHCHECK %q, want %q", cfg.Config.Healthcheck.Test, want)
	}

	// The config directory, mounted as the docs say.
	// Started first, as its HEALTHCHECK takes longest: the image's
	// defaults, whose metrics listener is on the container's 127.0.0.1.
	dc := startContainer(t, ctx, image, configDir(t)+":/etc/relay:ro", nil)
	confDir := configDir(t)
	confFile := filepath.Join(confDir, "relay.json")
	c := startContainer(t, ctx, image, confDir+":/etc/relay:ro", []string{"-p", "127.0.0.1::13337/udp"}, exposeMetrics...)
	name, p := c.name, c.relayProc
	c.waitReady(t, ctx)
	udpAddr := publishedPort(t, ctx, name, "13337/udp")
	if started := p.waitLog(t, "relay started"); started["listen"] != "0.0.0.0:13337" || started["metrics"] != "0.0.0.0:9337" {
		t.Errorf("relay started on %v, metrics %v; want the entrypoint's 0.0.0.0:13337 and the exposing 0.0.0.0:9337", started["listen"], started["metrics"])
	}
	// Meanwhile, the pitfall the docs warn of: a single-file mount.
	single := configDir(t)
	sc := startContainer(t, ctx, image, filepath.Join(single, "relay.json")+":/etc/relay/relay.json:ro", nil, exposeMetrics...)
	sc.waitReady(t, ctx)

	// The defaults: metrics on 127.0.0.1 inside, so a published port (or
	// --network host) reaches nothing.
	if started := dc.waitLog(t, "relay started"); started["metrics"] != "127.0.0.1:9337" {
		t.Errorf("by default the metrics listener is on %v, want 127.0.0.1:9337", started["metrics"])
	}
	if resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(dc.url + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("the image's defaults answered %s through a published port; want nothing reachable from outside", resp.Status)
	}

	// The process: uid and gid 65532, as the host sees it.
	var state struct{ Pid int }
	if err := json.Unmarshal([]byte(dockerRun(t, ctx, nil, "inspect", "--format", "{{json .State}}", name)), &state); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", state.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532\n", "Gid:\t65532\t65532\t65532\t65532\n"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("container process %d: no %q in\n%s", state.Pid, want, status)
		}
	}

	// The relay's UDP port, through 127.0.0.1: a STUN binding request is
	// answered with its transaction id, and counted.
	stunThroughPort(t, udpAddr)
	p.waitMetric(t, `relay_packets_in_total{kind="stun"}`, 1)
	p.waitMetric(t, "relay_stun_answered_total", 1)

	// Reload: the file replaced as an editor saves it (a new inode renamed
	// over the old), then SIGHUP through docker.
	p.waitMetric(t, "relay_galaxy_lanes", 0)
	replaceConfig(t, confFile, dockerGalaxyConfig)
	dockerRun(t, ctx, nil, "kill", "-s", "HUP", name)
	p.waitMetric(t, `relay_config_reloads_total{result="ok"}`, 1)
	p.waitMetric(t, "relay_galaxy_lanes", 1)
	if l := p.waitLog(t, "config reloaded"); l["galaxies"] != 1.0 || !strings.Contains(fmt.Sprint(l["changed"]), "galaxies") {
		t.Errorf("config reloaded line %v: want galaxies 1, changed [galaxies]", l)
	}

	// The single-file mount re-reads the old file: the replaced one is a
	// new inode, which the container does not see.
	sc.waitMetric(t, "relay_galaxy_lanes", 0)
	replaceConfig(t, filepath.Join(single, "relay.json"), dockerGalaxyConfig)
	dockerRun(t, ctx, nil, "kill", "-s", "HUP", sc.name)
	sc.waitMetric(t, `relay_config_reloads_total{result="ok"}`, 1)
	sc.waitMetric(t, "relay_galaxy_lanes", 0)

	// The image's own HEALTHCHECK (exec form: distroless has no shell),
	// with metrics exposed and with the defaults.
	for _, n := range []string{name, dc.name} {
		var health string
		if err := waitUntil(ctx, dockerHealthTimeout, func() bool {
			health = dockerRun(t, ctx, nil, "inspect", "--format", "{{.State.Health.Status}}", n)
			return health == "healthy"
		}); err != nil {
			t.Fatalf("%s: health %q after %v: %v\n%s", n, health, dockerHealthTimeout, err,
				dockerRun(t, ctx, nil, "inspect", "--format", "{{json .State.Health}}", n))
		}
	}

	// A clean stop: SIGTERM, a prompt exit 0, the shutdown logged.
	start = time.Now()
	dockerRun(t, ctx, nil, "stop", name)
	if took := time.Since(start); took > dockerStopLimit {
		t.Errorf("docker stop took %v, want under %v", took, dockerStopLimit)
	}
	if code := dockerRun(t, ctx, nil, "inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Errorf("exit code %s after docker stop, want 0", code)
	}
	if l := p.waitLog(t, "shutting down"); l["signal"] != "terminated" {
		t.Errorf("shutting down on %v, want SIGTERM (terminated)", l["signal"])
	}
	p.waitLog(t, "relay stopped")
}

// The config texts: the first the containers start with, the second the
// one a reload brings in (one galaxy).
const (
	dockerConfig       = `{"ship": "~sipsyl"}` + "\n"
	dockerGalaxyConfig = `{"ship": "~sipsyl", "network": {"galaxies": {"~zod": "127.0.0.1:31337"}}}` + "\n"
)

// configDir returns a fresh directory holding relay.json (dockerConfig),
// both readable by the container's nonroot user.
func configDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "relay.json"), []byte(dockerConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// replaceConfig replaces path with text as an editor saves: a new file
// renamed over the old, so a new inode.
func replaceConfig(t *testing.T, path, text string) {
	t.Helper()
	old := inode(t, path)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if inode(t, path) == old {
		t.Fatal("the replaced config file kept its inode: the test would not show the editor case")
	}
}

// container is a running container of the image, its logs followed.
type container struct {
	name string
	*relayProc
}

// exposeMetrics are the arguments after the image name that serve the
// metrics listener on the container's every address, to be published, as
// docs/operations.md says: the image's default is its 127.0.0.1.
var exposeMetrics = []string{"--config", "/etc/relay/relay.json", "--metrics", "0.0.0.0:9337"}

// startContainer runs image detached with volume mounted, the metrics
// port published on 127.0.0.1 (and more, the -p flags in ports) and args
// after the image name, and follows its logs into the relayProc. The
// container is removed at cleanup.
func startContainer(t *testing.T, ctx context.Context, image, volume string, ports []string, args ...string) *container {
	t.Helper()
	name := "relay-dockertest-" + rand.Text()[:8]
	t.Cleanup(func() {
		exec.Command("docker", "rm", "-f", name).Run()
	})
	run := append([]string{"run", "-d", "--name", name, "-p", "127.0.0.1::9337/tcp", "-v", volume}, ports...)
	dockerRun(t, ctx, nil, append(append(run, image), args...)...)
	logs := &vtool.SyncBuffer{}
	follow := exec.CommandContext(ctx, "docker", "logs", "-f", name)
	follow.Stdout, follow.Stderr = logs, logs
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		follow.Process.Kill()
		follow.Wait()
		if t.Failed() {
			t.Logf("logs of container %s:\n%s", name, logs.String())
		}
	})
	return &container{name: name, relayProc: &relayProc{stderr: logs, url: "http://" + publishedPort(t, ctx, name, "9337/tcp").String()}}
}

// waitReady waits for /readyz through the published metrics port.
func (c *container) waitReady(t *testing.T, ctx context.Context) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	if err := waitUntil(ctx, dockerStartTimeout, func() bool {
		resp, err := client.Get(c.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); err != nil {
		t.Fatalf("container %s: /readyz through the published port: %v", c.name, err)
	}
}

// stunThroughPort sends a binding request to addr and checks the answer.
func stunThroughPort(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	q := scry.STUNRequest{TxID: [12]byte{'d', 'o', 'c', 'k', 'e', 'r', '-', 's', 't', 'u', 'n', '1'}}
	if _, err := c.WriteToUDPAddrPort(q.Append(nil), addr); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		t.Fatalf("no STUN answer through %v: %v", addr, err)
	}
	var resp scry.STUNResponse
	if err := resp.Parse(buf[:n]); err != nil || resp.TxID != q.TxID || from != addr {
		t.Fatalf("answer from %v: %x (%v), want a binding response to %x from %v", from, buf[:n], err, q.TxID, addr)
	}
}

// inode returns path's inode number.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// requireDocker skips the test when no Docker engine can be used, or fails
// it under CI=true, where .ci/run has installed and started one.
func requireDocker(t *testing.T) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("docker"); err != nil {
		why = "no docker command"
	} else if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		why = fmt.Sprintf("docker daemon unreachable: %v: %s", err, bytes.TrimSpace(out))
	}
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and the container image test cannot run: %s (.ci/run installs docker.io and starts dockerd)", why)
	}
	t.Skipf("skipping the container image test: %s (under CI=true this fails instead)", why)
}

// dockerRun runs docker with args (the legacy builder for build, which
// takes local images as they are) and returns its trimmed stdout; any
// failure fails the test with its output.
func dockerRun(t *testing.T, ctx context.Context, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return strings.TrimSpace(stdout.String())
}

// publishedPort returns the 127.0.0.1 host address docker published
// container port port (e.g. "13337/udp") on.
func publishedPort(t *testing.T, ctx context.Context, name, port string) netip.AddrPort {
	t.Helper()
	out := dockerRun(t, ctx, nil, "port", name, port)
	for _, line := range strings.Split(out, "\n") {
		if ap, err := netip.ParseAddrPort(strings.TrimSpace(line)); err == nil && ap.Addr() == netip.MustParseAddr("127.0.0.1") {
			return ap
		}
	}
	t.Fatalf("docker port %s %s: no 127.0.0.1 address in %q", name, port, out)
	return netip.AddrPort{}
}

// haveImage reports whether the engine has image ref.
func haveImage(ctx context.Context, ref string) bool {
	return exec.CommandContext(ctx, "docker", "image", "inspect", ref).Run() == nil
}

// importImage makes image ref from the tar stream write produces, with the
// Dockerfile instructions changes applied (docker import --change).
func importImage(t *testing.T, ctx context.Context, ref string, changes []string, write func(*tar.Writer) error) {
	t.Helper()
	args := []string{"import"}
	for _, c := range append(changes, `LABEL org.urbit-relay.stand-in="test only: cmd/relay/docker_test.go, never a release base"`) {
		args = append(args, "--change", c)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		err := write(tw)
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	dockerRun(t, ctx, pr, append(args, "-", ref)...)
}

// goStandin returns a stand-in for the golang build image: no distribution,
// only /bin/sh (the host's, with the libraries it loads) for the RUN lines,
// the host's Go toolchain at /usr/local/go as in the official image, and,
// for an offline go mod download (GOPROXY=off), the host module cache's
// downloads of every module version go.sum names. It is tagged by what it
// holds, so it is made once per toolchain and go.sum.
func goStandin(t *testing.T, ctx context.Context) string {
	t.Helper()
	goroot := goEnv(t, "GOROOT")
	modcache := goEnv(t, "GOMODCACHE")
	gosum, err := os.ReadFile(filepath.Join(moduleRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%s\n", dockerStandinRecipe, runtime.Version(), goroot, gosum)
	ref := "relay-standin/golang:" + hex.EncodeToString(h.Sum(nil))[:16]
	if haveImage(ctx, ref) {
		return ref
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	libs := sharedLibs(t, sh)
	mods := moduleDownloads(t, modcache, gosum)
	requireModuleZips(t, modcache)
	importImage(t, ctx, ref, []string{
		"ENV PATH=/go/bin:/usr/local/go/bin:/usr/bin:/bin",
		"ENV HOME=/root", "ENV GOPATH=/go", "ENV GOTOOLCHAIN=local",
		"ENV GOPROXY=off", "ENV GOSUMDB=off",
		"WORKDIR /go",
	}, func(tw *tar.Writer) error {
		for _, d := range []struct {
			name string
			mode int64
		}{{"tmp/", 0o1777}, {"root/", 0o700}} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode}); err != nil {
				return err
			}
		}
		dirs := map[string]bool{}
		for _, f := range append([]string{"bin/sh", "usr/local/go", "go/pkg/mod/cache/download/x"}, libs...) {
			if err := tarParents(tw, dirs, strings.TrimPrefix(f, "/")); err != nil {
				return err
			}
		}
		if err := tarFile(tw, sh, "bin/sh"); err != nil {
			return err
		}
		for _, l := range libs {
			if err := tarFile(tw, l, strings.TrimPrefix(l, "/")); err != nil {
				return err
			}
		}
		if err := tarTree(tw, goroot, "usr/local/go", func(rel string) bool { return rel == "test" || rel == "api" }); err != nil {
			return err
		}
		for _, m := range mods {
			rel, err := filepath.Rel(modcache, m)
			if err != nil {
				return err
			}
			name := "go/pkg/mod/" + filepath.ToSlash(rel)
			if err := tarParents(tw, dirs, name); err != nil {
				return err
			}
			if err := tarFile(tw, m, name); err != nil {
				return err
			}
		}
		return nil
	})
	return ref
}

// distrolessStandin returns a stand-in for distroless static:nonroot: no
// shell, just the files the image relies on, /etc/passwd and /etc/group
// with nonroot as 65532, and the same user and working directory.
func distrolessStandin(t *testing.T, ctx context.Context) string {
	t.Helper()
	ref := "relay-standin/distroless-static:nonroot-" + dockerStandinRecipe
	if haveImage(ctx, ref) {
		return ref
	}
	importImage(t, ctx, ref, []string{
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"USER 65532", "WORKDIR /home/nonroot",
	}, func(tw *tar.Writer) error {
		for _, d := range []struct {
			name     string
			mode     int64
			uid, gid int
		}{{"etc/", 0o755, 0, 0}, {"tmp/", 0o1777, 0, 0}, {"home/", 0o755, 0, 0}, {"home/nonroot/", 0o700, 65532, 65532}} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, Uid: d.uid, Gid: d.gid}); err != nil {
				return err
			}
		}
		for name, text := range map[string]string{
			"etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
			"etc/group":  "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
		} {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(text))}); err != nil {
				return err
			}
			if _, err := io.WriteString(tw, text); err != nil {
				return err
			}
		}
		return nil
	})
	return ref
}

// goEnv returns go env name.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Fatalf("go env %s: %v", name, err)
	}
	return string(bytes.TrimSpace(out))
}

// sharedLibs returns the absolute paths of the shared libraries (and the
// dynamic loader) bin loads, as ldd lists them; none for a static binary.
func sharedLibs(t *testing.T, bin string) []string {
	t.Helper()
	out, _ := exec.Command("ldd", bin).Output() // ldd fails on a static binary
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		for i, s := range f {
			if strings.HasPrefix(s, "/") && (i == 0 || f[i-1] == "=>") {
				libs = append(libs, s)
			}
		}
	}
	return libs
}

// moduleDownloads returns the files of the module cache's download cache
// (GOMODCACHE/cache/download) for every module version go.sum names: its
// .info, .mod, .zip and .ziphash where present, which is what go mod
// download reads with GOPROXY=off.
func moduleDownloads(t *testing.T, modcache string, gosum []byte) []string {
	t.Helper()
	var files []string
	seen := map[string]bool{}
	for line := range strings.Lines(string(gosum)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		mod, ver := f[0], strings.TrimSuffix(f[1], "/go.mod")
		if seen[mod+"@"+ver] {
			continue
		}
		seen[mod+"@"+ver] = true
		dir := filepath.Join(modcache, "cache", "download", escapeModulePath(mod), "@v")
		for _, ext := range []string{".info", ".mod", ".zip", ".ziphash"} {
			if p := filepath.Join(dir, escapeModulePath(ver)+ext); fileExists(p) {
				files = append(files, p)
			}
		}
	}
	return files
}

// requireModuleZips fails the test, before a stand-in is made (and cached)
// without them, unless the module cache holds the zip of every module
// go.mod requires: what go mod download fetches, and so what the stand-in
// must carry.
func requireModuleZips(t *testing.T, modcache string) {
	t.Helper()
	cmd := exec.Command("go", "mod", "edit", "-json")
	cmd.Dir = moduleRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var gomod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &gomod); err != nil {
		t.Fatal(err)
	}
	for _, r := range gomod.Require {
		zip := filepath.Join(modcache, "cache", "download", escapeModulePath(r.Path), "@v", escapeModulePath(r.Version)+".zip")
		if !fileExists(zip) {
			t.Fatalf("the module cache lacks %s@%s (%s): run go mod download first", r.Path, r.Version, zip)
		}
	}
}

// escapeModulePath escapes a module path or version as the module cache
// stores it: each upper-case letter as '!' and its lower case.
func escapeModulePath(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fileExists reports whether path is a regular file.
func fileExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

// tarParents writes the directories above name not yet in dirs (mode
// 0755), and records them there.
func tarParents(tw *tar.Writer, dirs map[string]bool, name string) error {
	dir := filepath.ToSlash(filepath.Dir(name))
	if dir == "." || dirs[dir] {
		return nil
	}
	if err := tarParents(tw, dirs, dir); err != nil {
		return err
	}
	dirs[dir] = true
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755})
}

// tarFile writes the file at path (symlinks followed) as name.
func tarFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// tarTree writes the tree at root as prefix, symlinks as symlinks, less
// the top-level entries skip names.
func tarTree(tw *tar.Writer, root, prefix string, skip func(rel string) bool) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		name := prefix + "/" + filepath.ToSlash(rel)
		if rel == "." {
			name = prefix
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()})
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, ModTime: fi.ModTime()})
		case fi.Mode().IsRegular():
			return tarFile(tw, path, name)
		}
		return nil
	})
}
