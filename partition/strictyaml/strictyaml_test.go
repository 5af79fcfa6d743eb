package strictyaml

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func decode(t *testing.T, in string) (*Reader, *yaml.Node) {
	t.Helper()
	root, err := Decode([]byte(in), "t.yaml", 1<<20, "empty")
	if err != nil {
		t.Fatalf("Decode(%q): %v", in, err)
	}
	return &Reader{Source: "t.yaml", Work: 1000}, root
}

func TestDecodeRefusals(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "t.yaml: empty"},
		{"null", "~\n", "t.yaml: empty"},
		{"two documents", "a: 1\n---\nb: 2\n", "t.yaml:2: more than one YAML document"},
		{"syntax", "a: [1\n", "t.yaml:"},
		{"too large", strings.Repeat("#", 65), "t.yaml: file is larger than 64B"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in), "t.yaml", 64, "empty")
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode(%q) = %v, want an *Error containing %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestMappingKeysAndMerges(t *testing.T) {
	r, root := decode(t, "base: &b {rate: 1, slo: 2s}\nm: {<<: *b, rate: 5}\n")
	top, err := r.Mapping(root, "", "a mapping", []string{"base", "m"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := r.Mapping(top.Get("m"), top.At("m"), "a model", []string{"rate", "slo"})
	if err != nil {
		t.Fatal(err)
	}
	rate, err := r.NonNegFloat(m.Get("rate"), m.At("rate"))
	if err != nil || rate != 5 {
		t.Fatalf("explicit key must override the merged one: rate %v, %v", rate, err)
	}
	slo, err := r.PosDuration(m.Get("slo"), m.At("slo"))
	if err != nil || slo != 2*time.Second {
		t.Fatalf("merged slo %v, %v; want 2s", slo, err)
	}
	if _, ok := m.Lookup("missing"); ok || m.Has("missing") || m.Get("missing") != nil {
		t.Fatal("a key not given reads as given")
	}
	if _, err := r.Required(m, "missing", " (a hint)"); err == nil || err.Error() != "t.yaml:2: m.missing: required (a hint)" {
		t.Fatalf("Required: %v", err)
	}

	_, root = decode(t, "rte: 1\n")
	_, err = r.Mapping(root, "", "a mapping", []string{"rate", "slo"})
	if err == nil || err.Error() != `t.yaml:1: rte: unknown key "rte" (did you mean "rate"?) (allowed: rate, slo)` {
		t.Fatalf("typo: %v", err)
	}
	_, root = decode(t, "rate: 1\nrate: 2\n")
	if _, err = r.Mapping(root, "", "a mapping", []string{"rate"}); err == nil || !strings.Contains(err.Error(), `t.yaml:2: rate: key "rate" given twice (first at line 1)`) {
		t.Fatalf("duplicate: %v", err)
	}
	// nil allowed: any plain key (a name -> value mapping).
	_, root = decode(t, "anything: 1\n")
	if m, err := r.Mapping(root, "", "a mapping", nil); err != nil || !m.Has("anything") {
		t.Fatalf("open mapping: %v", err)
	}
}

func TestWorkBudget(t *testing.T) {
	// Each level refers to the previous one twice: 2^20 visits if followed
	// naively.
	var b strings.Builder
	b.WriteString("a0: &a0 [1, 2]\n")
	for i := 1; i <= 20; i++ {
		b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [*a" + strconv.Itoa(i-1) + ", *a" + strconv.Itoa(i-1) + "]\n")
	}
	root, err := Decode([]byte(b.String()), "bomb.yaml", 1<<20, "empty")
	if err != nil {
		t.Fatal(err)
	}
	r := &Reader{Source: "bomb.yaml", Work: 10_000}
	var walk func(n *yaml.Node, path string) error
	walk = func(n *yaml.Node, path string) error {
		n, err := r.Resolve(n, path)
		if err != nil {
			return err
		}
		for i, c := range n.Content {
			if err := walk(c, Index(path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, ""); err == nil || !strings.Contains(err.Error(), "too complex") {
		t.Fatalf("alias bomb: %v, want the work budget to stop it", err)
	}
}

func TestScalars(t *testing.T) {
	r, root := decode(t, "f: 1.5\nneg: -2\nnan: .nan\ni: 7\nd: 25ms\nbare: 25\nb: yes\nsz: 1.5GiB\nname: a b\nlist: [1]\n")
	m, err := r.Mapping(root, "", "a mapping", nil)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.FloatIn(m.Get("f"), "f", 0, 2); err != nil || v != 1.5 {
		t.Errorf("FloatIn f: %v, %v", v, err)
	}
	wantErr := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", what, err, want)
		}
	}
	_, err = r.FloatIn(m.Get("f"), "f", 0, 1)
	wantErr("FloatIn above", err, "t.yaml:1: f: 1.5 is larger than 1")
	_, err = r.NonNegFloat(m.Get("neg"), "neg")
	wantErr("negative", err, "t.yaml:2: neg: must not be negative, got -2")
	_, _, err = r.Float(m.Get("nan"), "nan")
	wantErr("nan", err, `t.yaml:3: nan: ".nan" is not a number`)
	if v, err := r.IntIn(m.Get("i"), "i", 1, 10); err != nil || v != 7 {
		t.Errorf("IntIn: %v, %v", v, err)
	}
	_, err = r.IntIn(m.Get("f"), "f", 1, 10)
	wantErr("IntIn of a float", err, `"1.5" is not an integer`)
	if d, _, err := r.Duration(m.Get("d"), "d"); err != nil || d != 25*time.Millisecond {
		t.Errorf("Duration: %v, %v", d, err)
	}
	_, _, err = r.Duration(m.Get("bare"), "bare")
	wantErr("bare number as duration", err, `"25" is not a duration`)
	if v, err := r.Bool(m.Get("b"), "b"); err != nil || !v {
		t.Errorf("Bool: %v, %v", v, err)
	}
	if v, err := r.Size(m.Get("sz"), "sz", math.MaxInt64); err != nil || v != 3<<29 {
		t.Errorf("Size: %v, %v", v, err)
	}
	_, err = r.Size(m.Get("sz"), "sz", 1<<30)
	wantErr("Size above the bound", err, `"1.5GiB" is larger than 1GiB`)
	_, _, err = r.Name(m.Get("name"), "name", "model name", 16)
	wantErr("Name", err, `t.yaml:9: name: model name "a b" has character ' '`)
	_, err = r.Seq(m.Get("f"), "f", "a list of models")
	wantErr("Seq of a scalar", err, `want a list of models, got "1.5"`)
	if seq, err := r.Seq(m.Get("list"), "list", "a list"); err != nil || len(seq) != 1 {
		t.Errorf("Seq: %v, %v", seq, err)
	}
	_, err = r.Scalar(m.Get("list"), "list", "a number")
	wantErr("Scalar of a list", err, "want a number, got a list")
}

func TestParseSizeAndFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"170MiB", 170 << 20}, {"1.5gib", 3 << 29}, {"2 TiB", 2 << 40}, {"1PiB", 1 << 50}, {"512", 512}} {
		if v, err := ParseSize(tc.in); err != nil || v != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, v, err, tc.want)
		}
	}
	for _, in := range []string{"", "-1", "1GB", "abc", "9999999999PiB", "1.2.3MiB"} {
		if v, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, v)
		}
	}
	for _, tc := range []struct {
		in   int64
		want string
	}{{0, "0B"}, {1023, "1023B"}, {170 << 20, "170MiB"}, {10<<30 + 1<<29, "10.5GiB"}, {-1 << 20, "-1MiB"}, {math.MinInt64, "-8192PiB"}} {
		if s := FormatSize(tc.in); s != tc.want {
			t.Errorf("FormatSize(%d) = %q, want %q", tc.in, s, tc.want)
		}
	}
}

func TestSuggest(t *testing.T) {
	if s := Suggest("modles", []string{"models", "seed"}); s != ` (did you mean "models"?)` {
		t.Errorf("Suggest(modles) = %q", s)
	}
	if s := Suggest("zzzzzz", []string{"models", "seed"}); s != "" {
		t.Errorf("Suggest(zzzzzz) = %q, want no suggestion", s)
	}
}

// FuzzDecode feeds arbitrary bytes to Decode and walks whatever it returns
// with every Reader method: nothing may panic, and every failure must be an
// *Error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"a: 1\n", "a: &x [*x]\n", "<<: {a: 1}\n", "- 1\n- {b: 2GiB}\n", "a: [1\n", "---\n---\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		root, err := Decode(data, "f.yaml", 1<<16, "empty")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not an *Error: %v", err, err)
			}
			return
		}
		r := &Reader{Source: "f.yaml", Work: 10_000}
		var walk func(n *yaml.Node, path string, depth int)
		walk = func(n *yaml.Node, path string, depth int) {
			if depth > 20 {
				return
			}
			for _, try := range []func() error{
				func() error { _, err := r.Mapping(n, path, "m", nil); return err },
				func() error { _, err := r.FloatIn(n, path, 0, 10); return err },
				func() error { _, err := r.IntIn(n, path, 0, 10); return err },
				func() error { _, err := r.Size(n, path, 1<<40); return err },
				func() error { _, err := r.Bool(n, path); return err },
				func() error { _, _, err := r.Duration(n, path); return err },
				func() error { _, _, err := r.Name(n, path, "name", 8); return err },
			} {
				if err := try(); err != nil {
					var e *Error
					if !errors.As(err, &e) {
						t.Fatalf("error %T is not an *Error: %v", err, err)
					}
				}
			}
			if m, err := r.Mapping(n, path, "m", nil); err == nil {
				for _, k := range m.Keys() {
					walk(m.Get(k), m.At(k), depth+1)
				}
			} else if seq, err := r.Seq(n, path, "l"); err == nil {
				for i, c := range seq {
					walk(c, Index(path, i), depth+1)
				}
			}
		}
		walk(root, "", 0)
	})
}

// ReadFile reads at most one byte past the limit (so that Decode refuses
// the file), says so of a directory, and prefixes a failure to open.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.yaml")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := ReadFile(path, 4, "pkg", "a file"); err != nil || string(data) != "01234" {
		t.Errorf("ReadFile with a limit of 4 = %q, %v; want the first 5 bytes", data, err)
	}
	if data, err := ReadFile(path, 100, "pkg", "a file"); err != nil || string(data) != "0123456789" {
		t.Errorf("ReadFile = %q, %v", data, err)
	}
	var e *Error
	if _, err := ReadFile(dir, 100, "pkg", "a file"); !errors.As(err, &e) || e.Msg != "is a directory, not a file" || e.Source != dir {
		t.Errorf("ReadFile(dir) = %v, want an *Error saying it is a directory", err)
	}
	_, err := ReadFile(filepath.Join(dir, "none"), 100, "pkg", "a file")
	if !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), "pkg: ") {
		t.Errorf("ReadFile(missing) = %v, want pkg: ... not exist", err)
	}
}
