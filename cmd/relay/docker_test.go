package main

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
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

// TestDockerfileBuild runs the Dockerfile's go build command as the image
// build does (sh -c, from the module root, with the VERSION build arg in
// the environment), then checks the binary is static and carries the
// version. No Docker engine is needed.
func TestDockerfileBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux")
	}
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
	cmd.Env = append(os.Environ(), "VERSION=v0.0.0-dockertest")
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
	for _, want := range []string{"relay v0.0.0-dockertest\n", "CGO_ENABLED=0\n", "-trimpath=true\n"} {
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
	m := regexp.MustCompile(`"--metrics", "[0-9.]*:(\d+)"`).FindStringSubmatch(entry)
	if m == nil {
		t.Fatalf("ENTRYPOINT %q does not set --metrics", entry)
	}
	port := m[1]
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
