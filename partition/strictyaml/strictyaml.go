// Package strictyaml reads Symphony's YAML input files (workload files,
// partition model files, application files) strictly and safely: unknown
// keys, keys given twice, wrong types and non-finite numbers are errors that
// name the file, the line and the field, and a small hostile file (a bomb of
// aliases or merge keys, a huge document) cannot make the reader work or
// allocate without bound.
//
// Every input format of Symphony shares this one reader, so that the same
// mistake reads the same way in every file and every fix to the reader's
// safety reaches all of them. A format's parser walks the node tree with a
// Reader, asking for the shape it wants at each place (Mapping, Seq, Str,
// Duration, Size, ...); each call charges the Reader's work budget.
package strictyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Error is a problem at one place in an input file. Its message names the
// file, the line and the field ("app.yaml:7: modules[3].rate: -1 must not
// be negative"), so that a user can fix the file without guessing, while
// callers can still inspect the parts.
type Error struct {
	// Source names the file.
	Source string
	// Line is 1-based; 0 when the problem has no single line (an empty
	// file, a file too large).
	Line int
	// Field is the path of the field, such as models[1].slo; empty for YAML
	// syntax errors.
	Field string
	// Msg says what is wrong and, where it helps, what was expected.
	Msg string
	// Err is the underlying error, if any (a missing trace file, say), so
	// that errors.Is(err, fs.ErrNotExist) works.
	Err error
}

// Error formats the error as "file:line: field: message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// ReadFile reads the input file at path for Decode: at most maxSize+1
// bytes, so that a pipe or a huge file cannot exhaust memory and Decode
// still sees that it is too large. pkg prefixes a failure to open it
// ("partition: open x: no such file or directory"); a directory ("is a
// directory, not <what>") or a failed read is an *Error.
func ReadFile(path string, maxSize int, pkg, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pkg, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, &Error{Source: path, Msg: "is a directory, not " + what}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(maxSize)+1))
	if err != nil {
		return nil, &Error{Source: path, Msg: err.Error(), Err: err}
	}
	return data, nil
}

// Decode parses data, the contents of the file src, into the root node of
// its only document. It refuses data longer than maxSize, more than one
// document, and an empty document (with the message emptyMsg, which should
// say what the file wants). The YAML library is third-party code fed
// untrusted input, so a panic in it becomes an error rather than a crash.
func Decode(data []byte, src string, maxSize int, emptyMsg string) (root *yaml.Node, err error) {
	if len(data) > maxSize {
		return nil, &Error{Source: src, Msg: fmt.Sprintf("file is larger than %s; an input file is a short YAML document", FormatSize(int64(maxSize)))}
	}
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &Error{Source: src, Msg: fmt.Sprintf("YAML parser failed: %v", r)}
		}
	}()
	syntax := func(err error) error {
		msg := err.Error()
		if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			return &Error{Source: src, Line: line, Msg: "YAML: " + m[2], Err: err}
		}
		return &Error{Source: src, Msg: "YAML: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
	}
	empty := &Error{Source: src, Msg: emptyMsg}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, empty
		}
		return nil, syntax(err)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, &Error{Source: src, Line: next.Line, Msg: "more than one YAML document; the file holds exactly one"}
	case !errors.Is(err, io.EOF):
		return nil, syntax(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, empty
	}
	root = doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, empty
	}
	return root, nil
}

// maxMergeDepth bounds merge keys (<<) in merged mappings in merged
// mappings..., which would otherwise recurse once per mapping.
const maxMergeDepth = 16

// Reader walks one document's node tree on behalf of a format's parser. It
// holds the work budget and the file's name; nothing outlives the parse.
type Reader struct {
	// Source names the file in errors.
	Source string
	// Work is the number of YAML nodes the reader may still visit, aliases
	// counted each time they are followed. It must be set to a positive
	// budget: a few times the largest legitimate file's node count.
	Work int
}

// ErrAt builds an *Error for the field at path whose node is n (nil: no
// line).
func (r *Reader) ErrAt(n *yaml.Node, path, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{Source: r.Source, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)}
}

// Resolve follows aliases to the node they name and charges the visit to
// the work budget. A nil node is a missing value.
func (r *Reader) Resolve(n *yaml.Node, path string) (*yaml.Node, error) {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 100 {
			return nil, r.ErrAt(n, path, "alias *%s names no usable anchor", n.Value)
		}
		n = n.Alias
	}
	if n == nil {
		return nil, r.ErrAt(nil, path, "missing value")
	}
	r.Work--
	if r.Work < 0 {
		return nil, r.ErrAt(n, path, "file too complex: more than its budget of YAML nodes visited (aliases count each time they are used)")
	}
	return n, nil
}

// Describe renders a node for "got ..." in messages.
func Describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return strconv.Quote(v)
	}
	return "an unexpected YAML node"
}

// Join builds a field path: Join("models[1]", "slo") is "models[1].slo".
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Index builds the path of a list element: Index("models", 1) is
// "models[1]".
func Index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// Map is a YAML mapping whose keys have been checked against an allowed
// set, with merge keys (<<) applied.
type Map struct {
	// Node is the mapping itself, for errors about a missing key.
	Node *yaml.Node
	// Path is the mapping's field path.
	Path string
	keys map[string]*yaml.Node // key name -> key node
	vals map[string]*yaml.Node // key name -> value node (unresolved)
	// merged holds the mappings already merged in. A mapping merged twice
	// adds nothing, and skipping it keeps a small file of nested merge
	// lists from costing exponential time (and cycles from looping).
	merged map[*yaml.Node]bool
}

// Has reports whether key was given.
func (m *Map) Has(key string) bool { _, ok := m.vals[key]; return ok }

// Get returns key's value node (unresolved: pass it to a Reader method), or
// nil if the key was not given.
func (m *Map) Get(key string) *yaml.Node { return m.vals[key] }

// Lookup returns key's value node (unresolved) and whether the key was
// given, for the `if v, ok := m.Lookup("rate"); ok` pattern of optional
// keys.
func (m *Map) Lookup(key string) (*yaml.Node, bool) {
	v, ok := m.vals[key]
	return v, ok
}

// KeyNode returns the node of key itself, for errors about the key rather
// than its value; nil if the key was not given.
func (m *Map) KeyNode(key string) *yaml.Node { return m.keys[key] }

// At is the field path of key.
func (m *Map) At(key string) string { return Join(m.Path, key) }

// Keys returns the keys given, in no particular order.
func (m *Map) Keys() []string {
	ks := make([]string, 0, len(m.vals))
	for k := range m.vals {
		ks = append(ks, k)
	}
	return ks
}

// Mapping reads n as a mapping with keys from allowed; want describes it in
// errors ("a model mapping"). Unknown keys (with a did-you-mean for likely
// typos) and keys given twice are errors; keys brought in by a merge key
// are overridden by explicit ones, as YAML specifies. allowed nil accepts
// any plain key (a mapping from names to values).
func (r *Reader) Mapping(n *yaml.Node, path, want string, allowed []string) (*Map, error) {
	n, err := r.Resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, r.ErrAt(n, path, "want %s, got %s", want, Describe(n))
	}
	m := &Map{Node: n, Path: path, keys: make(map[string]*yaml.Node), vals: make(map[string]*yaml.Node)}
	if err := r.collect(m, n, allowed, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// collect adds n's entries to m, then those of the mappings n merges, depth
// first. An entry never overrides one collected before it, which gives
// YAML's precedence: a mapping's own keys, then its merge sources in order.
// depth is 0 for the mapping itself.
func (r *Reader) collect(m *Map, n *yaml.Node, allowed []string, depth int) error {
	if depth > maxMergeDepth {
		return r.ErrAt(n, m.Path, "merge keys (<<) nested more than %d deep", maxMergeDepth)
	}
	var merges []*yaml.Node
	var own map[string]*yaml.Node // keys of n itself, for duplicates
	if depth > 0 {
		own = make(map[string]*yaml.Node)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		k, err := r.Resolve(k, m.Path)
		if err != nil {
			return err
		}
		if k.Kind != yaml.ScalarNode {
			return r.ErrAt(k, m.Path, "mapping keys must be plain names, got %s", Describe(k))
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		name := k.Value
		if allowed != nil && !slices.Contains(allowed, name) {
			return r.ErrAt(k, Join(m.Path, name), "unknown key %q%s (allowed: %s)", name, Suggest(name, allowed), strings.Join(allowed, ", "))
		}
		if depth > 0 {
			if prev, ok := own[name]; ok {
				return r.ErrAt(k, Join(m.Path, name), "key %q given twice (first at line %d)", name, prev.Line)
			}
			own[name] = k
		}
		if prev, ok := m.keys[name]; ok {
			if depth == 0 {
				return r.ErrAt(k, Join(m.Path, name), "key %q given twice (first at line %d)", name, prev.Line)
			}
			continue
		}
		m.keys[name] = k
		m.vals[name] = v
	}
	for _, v := range merges {
		v, err := r.Resolve(v, m.Path)
		if err != nil {
			return err
		}
		var srcs []*yaml.Node
		switch v.Kind {
		case yaml.MappingNode:
			srcs = []*yaml.Node{v}
		case yaml.SequenceNode:
			srcs = v.Content
		default:
			return r.ErrAt(v, m.Path, "merge key (<<) wants a mapping or a list of mappings, got %s", Describe(v))
		}
		for _, s := range srcs {
			s, err := r.Resolve(s, m.Path)
			if err != nil {
				return err
			}
			if s.Kind != yaml.MappingNode {
				return r.ErrAt(s, m.Path, "merge key (<<) wants a mapping or a list of mappings, got %s", Describe(s))
			}
			if s == m.Node || m.merged[s] {
				continue
			}
			if m.merged == nil {
				m.merged = make(map[*yaml.Node]bool)
			}
			m.merged[s] = true
			if err := r.collect(m, s, allowed, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// Suggest returns ` (did you mean "x"?)` for the allowed name closest to
// name, if it is close enough to be a likely typo, and "" otherwise; for
// messages about unknown keys and enum values.
func Suggest(name string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(name), a); d < bestD {
			best, bestD = a, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance, for suggestions only. Keys
// longer than 64 bytes are never typos of ours.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Required returns key's value node, or an error at the mapping's line that
// says the key is required, followed by hint (" (the end-to-end SLO)").
func (r *Reader) Required(m *Map, key, hint string) (*yaml.Node, error) {
	v, ok := m.vals[key]
	if !ok {
		return nil, r.ErrAt(m.Node, m.At(key), "required%s", hint)
	}
	return v, nil
}

// Seq reads n as a list and returns its elements (unresolved).
func (r *Reader) Seq(n *yaml.Node, path, want string) ([]*yaml.Node, error) {
	n, err := r.Resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.SequenceNode {
		return nil, r.ErrAt(n, path, "want %s, got %s", want, Describe(n))
	}
	return n.Content, nil
}

// Scalar resolves n and checks that it is a scalar with a value.
func (r *Reader) Scalar(n *yaml.Node, path, want string) (*yaml.Node, error) {
	n, err := r.Resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return nil, r.ErrAt(n, path, "want %s, got %s", want, Describe(n))
	}
	return n, nil
}

// Str reads a scalar's text.
func (r *Reader) Str(n *yaml.Node, path, want string) (string, *yaml.Node, error) {
	n, err := r.Scalar(n, path, want)
	if err != nil {
		return "", nil, err
	}
	return n.Value, n, nil
}

// Bool reads true or false.
func (r *Reader) Bool(n *yaml.Node, path string) (bool, error) {
	n, err := r.Scalar(n, path, "true or false")
	if err != nil {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(n.Value)) {
	case "true", "yes", "on":
		return true, nil
	case "false", "no", "off":
		return false, nil
	}
	return false, r.ErrAt(n, path, "want true or false, got %s", Describe(n))
}

// Duration reads a Go duration. Bare numbers other than 0 are rejected:
// whether "25" means seconds or milliseconds is exactly the ambiguity the
// unit removes.
func (r *Reader) Duration(n *yaml.Node, path string) (time.Duration, *yaml.Node, error) {
	n, err := r.Scalar(n, path, "a duration such as 25ms")
	if err != nil {
		return 0, nil, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return 0, nil, r.ErrAt(n, path, "%q is not a duration (want Go syntax such as 25ms)", n.Value)
	}
	return d, n, nil
}

// NonNegDuration is Duration that must be >= 0.
func (r *Reader) NonNegDuration(n *yaml.Node, path string) (time.Duration, error) {
	d, n, err := r.Duration(n, path)
	if err == nil && d < 0 {
		err = r.ErrAt(n, path, "must not be negative, got %v", d)
	}
	return d, err
}

// PosDuration is Duration that must be > 0.
func (r *Reader) PosDuration(n *yaml.Node, path string) (time.Duration, error) {
	d, n, err := r.Duration(n, path)
	if err == nil && d <= 0 {
		err = r.ErrAt(n, path, "must be positive, got %v", d)
	}
	return d, err
}

// Float reads a finite number.
func (r *Reader) Float(n *yaml.Node, path string) (float64, *yaml.Node, error) {
	n, err := r.Scalar(n, path, "a number")
	if err != nil {
		return 0, nil, err
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64)
	if err != nil {
		return 0, nil, r.ErrAt(n, path, "%q is not a number", n.Value)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, nil, r.ErrAt(n, path, "%q is not a finite number", n.Value)
	}
	return v, n, nil
}

// NonNegFloat is Float that must be >= 0, such as a rate.
func (r *Reader) NonNegFloat(n *yaml.Node, path string) (float64, error) {
	v, n, err := r.Float(n, path)
	if err == nil && v < 0 {
		err = r.ErrAt(n, path, "must not be negative, got %g", v)
	}
	return v, err
}

// FloatIn is Float that must lie in [lo, hi]. Bounds keep sums over a
// large file finite and precise.
func (r *Reader) FloatIn(n *yaml.Node, path string, lo, hi float64) (float64, error) {
	v, n, err := r.Float(n, path)
	switch {
	case err != nil:
	case v < lo && lo == 0:
		err = r.ErrAt(n, path, "must not be negative, got %g", v)
	case v < lo:
		err = r.ErrAt(n, path, "%g is below %g", v, lo)
	case v > hi:
		err = r.ErrAt(n, path, "%g is larger than %g", v, hi)
	}
	return v, err
}

// IntIn reads a decimal integer in [lo, hi].
func (r *Reader) IntIn(n *yaml.Node, path string, lo, hi int) (int, error) {
	n, err := r.Scalar(n, path, "an integer")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(n.Value), 10, 64)
	if err != nil {
		return 0, r.ErrAt(n, path, "%q is not an integer", n.Value)
	}
	if v < int64(lo) || v > int64(hi) {
		return 0, r.ErrAt(n, path, "%d is outside %d..%d", v, lo, hi)
	}
	return int(v), nil
}

// Size reads a byte count in [0, hi] (ParseSize's syntax: 170MiB, 1.5GiB).
func (r *Reader) Size(n *yaml.Node, path string, hi int64) (int64, error) {
	n, err := r.Scalar(n, path, "a size such as 170MiB")
	if err != nil {
		return 0, err
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return 0, r.ErrAt(n, path, "%q %v", n.Value, err)
	}
	if v > hi {
		return 0, r.ErrAt(n, path, "%q is larger than %s", n.Value, FormatSize(hi))
	}
	return v, nil
}

// CheckName keeps a name (of a model, a GPU type, a module) usable as a URL
// path segment (the gateway serves /v2/models/<name>), a CSV cell, a file
// name and a YAML key: letters, digits, '-', '_' and '.', at most maxLen
// bytes. The error completes "name ...".
func CheckName(s string, maxLen int) error {
	switch {
	case s == "":
		return errors.New("must not be empty")
	case len(s) > maxLen:
		return fmt.Errorf("is longer than %d bytes", maxLen)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("%q has character %q; names use letters, digits, '-', '_' and '.'", s, c)
		}
	}
	return nil
}

// Name reads a name that passes CheckName; what says what it names ("model
// name"), in errors.
func (r *Reader) Name(n *yaml.Node, path, what string, maxLen int) (string, *yaml.Node, error) {
	s, n, err := r.Str(n, path, "a "+what)
	if err != nil {
		return "", nil, err
	}
	if err := CheckName(s, maxLen); err != nil {
		return "", nil, r.ErrAt(n, path, "%s %v", what, err)
	}
	return s, n, nil
}
