// Package symphony_test holds the architecture's rules as a test: which
// packages may import which. The rules keep the layers apart (transport
// knows no component, the scheduler no backend or frontend, backend and
// frontend not each other, partition no transport) and keep the bench
// harness out of production: the harness drives production code, never the
// reverse, so that what runs in a cluster is what the benchmarks measured
// and nothing more. Test files follow the same rules, except tests that
// live in bench/ itself.
package symphony_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/symphony-serving/symphony"

// pkgInfo is what `go list` says of one package of the module, with paths
// relative to the module ("" for its root).
type pkgInfo struct {
	path        string
	imports     []string // direct, of its non-test files
	deps        []string // transitive, of its non-test files
	testImports []string // direct, of its _test.go files (both packages)
}

// listModule lists every package of the module.
func listModule(t *testing.T) map[string]*pkgInfo {
	t.Helper()
	// go test puts its own go first on the PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command on the PATH: %v", err)
	}
	cmd := exec.Command(goBin, "list", "-e", "-f",
		`{{.ImportPath}}|{{join .Imports ","}}|{{join .Deps ","}}|{{join .TestImports ","}},{{join .XTestImports ","}}|{{if .Error}}{{.Error}}{{end}}`,
		"./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]*pkgInfo{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), "|", 5)
		if len(f) != 5 {
			t.Fatalf("go list: unexpected line %q", sc.Text())
		}
		if f[4] != "" {
			t.Fatalf("go list: %s: %s", f[0], f[4])
		}
		p := &pkgInfo{path: rel(f[0]), imports: inModuleRel(f[1]), deps: inModuleRel(f[2])}
		for _, d := range strings.Split(f[3], ",") {
			if inModule(d) && rel(d) != p.path {
				p.testImports = append(p.testImports, rel(d))
			}
		}
		pkgs[p.path] = p
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages of the module: is the test running in the module?", len(pkgs))
	}
	return pkgs
}

// inModuleRel picks the module's packages out of a comma-separated list.
func inModuleRel(list string) []string {
	var out []string
	for _, d := range strings.Split(list, ",") {
		if inModule(d) {
			out = append(out, rel(d))
		}
	}
	return out
}

func inModule(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

func rel(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "/") }

// under reports whether package p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// underAny reports whether p is under one of dirs.
func underAny(p string, dirs ...string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return under(p, d) })
}

// importRule forbids the packages under From to depend on those under Not.
type importRule struct {
	why  string
	from func(p string) bool
	not  []string
}

var importRules = []importRule{
	// tensor is a top-level package because every layer names its types:
	// the serving configuration (and through it the epoch job), the wire
	// protocol that announces a model's tensors, the backends that run
	// them and the frontends that check them.
	{"tensor is the vocabulary of request bytes that every layer shares, so it depends on none",
		func(p string) bool { return under(p, "tensor") },
		[]string{"scheduler", "backend", "frontend", "partition", "transport", "bench", "cmd"}},
	{"transport carries bytes for every component and knows none of them",
		func(p string) bool { return under(p, "transport") },
		[]string{"scheduler", "backend", "frontend", "partition"}},
	{"the scheduler sees task descriptors and GPUs, never a backend's or a frontend's code",
		func(p string) bool { return under(p, "scheduler") },
		[]string{"backend", "frontend"}},
	{"backends pull from frontends over the transport, not through their code",
		func(p string) bool { return under(p, "backend") },
		[]string{"frontend"}},
	{"frontends hand inputs to backends over the transport, not through their code",
		func(p string) bool { return under(p, "frontend") },
		[]string{"backend"}},
	{"the epoch job plans; it does not move bytes",
		func(p string) bool { return under(p, "partition") },
		[]string{"transport"}},
	// cmd/symphony is the binary a deployment runs (`symphony scheduler`,
	// backend, frontend, partition, provision); the harness's commands live in
	// cmd/symphony-bench, which `symphony sim|demo|bench` runs.
	{"production code, the symphony binary included, never depends on the bench harness",
		func(p string) bool { return !underAny(p, "bench") && p != "" && !under(p, "cmd/symphony-bench") },
		[]string{"bench"}},
}

// TestImportRules fails on any dependency, direct or through other
// packages of the module, that breaks a rule, naming the chain.
func TestImportRules(t *testing.T) {
	pkgs := listModule(t)
	for _, r := range importRules {
		for _, p := range sortedKeys(pkgs) {
			if !r.from(p) {
				continue
			}
			info := pkgs[p]
			for _, d := range info.deps {
				if underAny(d, r.not...) {
					t.Errorf("%s depends on %s%s: %s", p, d, chain(pkgs, p, d), r.why)
				}
			}
			if under(p, "bench") {
				continue // bench's own tests may use anything
			}
			for _, ti := range info.testImports {
				bad := ti
				if !underAny(ti, r.not...) {
					bad = ""
					if ip, ok := pkgs[ti]; ok {
						if i := slices.IndexFunc(ip.deps, func(d string) bool { return underAny(d, r.not...) }); i >= 0 {
							bad = ip.deps[i]
						}
					}
				}
				if bad != "" {
					t.Errorf("tests of %s import %s, which is or depends on %s: %s", p, ti, bad, r.why)
				}
			}
		}
	}
}

// chain finds a shortest import path from p to d, for the error message.
func chain(pkgs map[string]*pkgInfo, p, d string) string {
	// Breadth-first over direct imports.
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == d {
			var path []string
			for c := d; c != ""; c = prev[c] {
				path = append(path, c)
			}
			slices.Reverse(path)
			return fmt.Sprintf(" (%s)", strings.Join(path, " → "))
		}
		info, ok := pkgs[cur]
		if !ok {
			continue
		}
		for _, n := range info.imports {
			if _, seen := prev[n]; !seen {
				prev[n] = cur
				queue = append(queue, n)
			}
		}
	}
	return ""
}

func sortedKeys(m map[string]*pkgInfo) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
