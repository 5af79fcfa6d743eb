package partition

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxModelFileSize is the largest model file ParseModel accepts, in bytes. A
// model file lists one short line per model, so even the largest real zoo
// is well under a megabyte; the limit keeps a mistaken or hostile input (a
// trace passed with -f, say) from exhausting memory in the YAML parser.
const MaxModelFileSize = 16 << 20

// Limits on what a model file may hold. They are far above any real
// deployment and exist so that sums over models cannot overflow and a small
// file built from aliases cannot make the parser work without bound.
const (
	// MaxModelFileModels bounds the models of one file.
	MaxModelFileModels = 100_000
	// MaxModelFileParts bounds parts: every engine allocates per part.
	MaxModelFileParts = 1 << 16
	// maxModelRate bounds one model's rate (requests/s) so that the sum of
	// all rates stays finite and precise enough to compare.
	maxModelRate = 1e12
	// maxModelMemory bounds one model's static and dynamic memory (16 TiB),
	// so that sums over MaxModelFileModels models, and twice that for a
	// move's disruption, fit in an int64.
	maxModelMemory = 1 << 44
	// maxModelFileWork bounds the YAML nodes visited, aliases counted each
	// time they are followed.
	maxModelFileWork = 4_000_000
	// maxModelNameLen bounds model names.
	maxModelNameLen = 128
)

// ModelFile is a parsed partition model file (docs/workload-format.md,
// "Partition model file"): the problem to solve and what the command needs
// to report it.
type ModelFile struct {
	// Source is the file as named to ParseModelFile or ParseModel.
	Source string
	// Problem is the partitioning instance. Model order is the file's order;
	// Problem.Current is nil when the file has no current key, and otherwise
	// holds Unassigned for every model the mapping leaves out (a new model,
	// which costs a load but no unload). MaxDisruption is -1 (unbounded)
	// when the file gives no max_disruption.
	Problem *Problem
	// Warnings are things the file says that have no effect, such as a
	// max_disruption without a current assignment to measure it against.
	Warnings []string
}

// ModelFileError is a problem at one place in a model file. Its message
// names the file, the line and the field ("models.yaml:7: models[3].rate:
// want a non-negative number, have "abc""), so that a user can fix the file
// without guessing, while callers can still inspect the parts.
type ModelFileError struct {
	// Source names the file; Line is 1-based, 0 when there is no single
	// line (an empty file, a file too large).
	Source string
	Line   int
	// Field is the path of the field, such as models[3].rate; empty for
	// YAML syntax errors.
	Field string
	Msg   string
	// Err is the underlying error, if any, for errors.Is.
	Err error
}

// Error formats the error as "file:line: field: message".
func (e *ModelFileError) Error() string {
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
func (e *ModelFileError) Unwrap() error { return e.Err }

// ParseModelFile reads and parses the model file at path.
func ParseModelFile(path string) (*ModelFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, &ModelFileError{Source: path, Msg: "is a directory, not a model file"}
	}
	// Pipes are fine, but only up to MaxModelFileSize, which the limited
	// read enforces.
	data, err := io.ReadAll(io.LimitReader(f, MaxModelFileSize+1))
	if err != nil {
		return nil, &ModelFileError{Source: path, Msg: err.Error(), Err: err}
	}
	return ParseModel(data, path)
}

// ParseModel parses a model file's contents; source names it in errors
// ("" reads as "models"). Parsing is strict: unknown keys, wrong types,
// negative or non-finite numbers, duplicate names, current entries for
// unknown models or parts out of range, and models that could fit no part
// at all are errors, each a *ModelFileError naming the line and field. The
// returned problem passes Problem.Validate.
func ParseModel(data []byte, source string) (*ModelFile, error) {
	name := source
	if name == "" {
		name = "models"
	}
	if len(data) > MaxModelFileSize {
		return nil, &ModelFileError{Source: name, Msg: fmt.Sprintf("file is larger than %d MiB; a model file is a short YAML list", MaxModelFileSize>>20)}
	}
	root, err := decodeModelYAML(data, name)
	if err != nil {
		return nil, err
	}
	p := &mfParser{src: name, work: maxModelFileWork}
	mf, err := p.file(root)
	if err != nil {
		return nil, err
	}
	mf.Source = source
	if err := mf.Problem.Validate(); err != nil {
		// The checks above cover Validate's; this is a backstop.
		return nil, &ModelFileError{Source: name, Msg: err.Error(), Err: err}
	}
	return mf, nil
}

var modelYAMLLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeModelYAML parses data into the root node of its only document. The
// YAML library is third-party code fed untrusted input, so a panic in it
// becomes an error rather than a crash.
func decodeModelYAML(data []byte, src string) (root *yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			root, err = nil, &ModelFileError{Source: src, Msg: fmt.Sprintf("YAML parser failed: %v", r)}
		}
	}()
	syntax := func(err error) error {
		msg := err.Error()
		if m := modelYAMLLineRE.FindStringSubmatch(msg); m != nil {
			line, _ := strconv.Atoi(m[1])
			return &ModelFileError{Source: src, Line: line, Msg: "YAML: " + m[2], Err: err}
		}
		return &ModelFileError{Source: src, Msg: "YAML: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
	}
	empty := &ModelFileError{Source: src, Msg: "empty model file (want a YAML mapping with at least parts and models)"}
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
		return nil, &ModelFileError{Source: src, Line: next.Line, Msg: "more than one YAML document; a model file holds exactly one"}
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

// mfParser walks one model file's node tree.
type mfParser struct {
	src  string
	work int // YAML nodes still allowed to visit
}

func (p *mfParser) errAt(n *yaml.Node, path, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &ModelFileError{Source: p.src, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)}
}

// resolve follows aliases and charges the visit to the work budget.
func (p *mfParser) resolve(n *yaml.Node, path string) (*yaml.Node, error) {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if n.Alias == nil || i > 100 {
			return nil, p.errAt(n, path, "alias *%s names no usable anchor", n.Value)
		}
		n = n.Alias
	}
	if n == nil {
		return nil, p.errAt(nil, path, "missing value")
	}
	p.work--
	if p.work < 0 {
		return nil, p.errAt(n, path, "model file too complex: more than %d YAML nodes visited (aliases count each time they are used)", maxModelFileWork)
	}
	return n, nil
}

// have renders a node for "have ..." in messages.
func have(n *yaml.Node) string {
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

func fieldJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// mfMap is a mapping whose keys were checked against an allowed set.
type mfMap struct {
	node *yaml.Node
	path string
	vals map[string]*yaml.Node
}

func (m *mfMap) at(key string) string { return fieldJoin(m.path, key) }

// mapping reads n as a mapping with keys from allowed; unknown keys, keys
// given twice and merge keys (<<) are errors. Merge keys are refused rather
// than half supported: a model file is flat enough not to need them.
func (p *mfParser) mapping(n *yaml.Node, path, want string, allowed []string) (*mfMap, error) {
	n, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errAt(n, path, "want %s, have %s", want, have(n))
	}
	m := &mfMap{node: n, path: path, vals: make(map[string]*yaml.Node)}
	keyNodes := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := p.resolve(n.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, p.errAt(k, path, "mapping keys must be plain names, have %s", have(k))
		}
		if k.ShortTag() == "!!merge" {
			return nil, p.errAt(k, path, "merge keys (<<) are not supported in model files")
		}
		name := k.Value
		if !containsString(allowed, name) {
			return nil, p.errAt(k, fieldJoin(path, name), "unknown key %q (allowed: %s)", name, strings.Join(allowed, ", "))
		}
		if prev, ok := keyNodes[name]; ok {
			return nil, p.errAt(k, fieldJoin(path, name), "key %q given twice (first at line %d)", name, prev.Line)
		}
		keyNodes[name] = k
		m.vals[name] = n.Content[i+1]
	}
	return m, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scalar resolves n and checks that it is a scalar with a value.
func (p *mfParser) scalar(n *yaml.Node, path, want string) (*yaml.Node, error) {
	n, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return nil, p.errAt(n, path, "want %s, have %s", want, have(n))
	}
	return n, nil
}

// number reads a finite number in [0, hi].
func (p *mfParser) number(n *yaml.Node, path string, hi float64) (float64, error) {
	const want = "a non-negative number"
	n, err := p.scalar(n, path, want)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, p.errAt(n, path, "want %s, have %s", want, have(n))
	}
	if v > hi {
		return 0, p.errAt(n, path, "%s is larger than %g", n.Value, hi)
	}
	return v, nil
}

// integer reads a decimal integer in [lo, hi].
func (p *mfParser) integer(n *yaml.Node, path string, lo, hi int) (int, *yaml.Node, error) {
	want := fmt.Sprintf("an integer in %d..%d", lo, hi)
	n, err := p.scalar(n, path, want)
	if err != nil {
		return 0, nil, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(n.Value), 10, 64)
	if err != nil || v < int64(lo) || v > int64(hi) {
		return 0, nil, p.errAt(n, path, "want %s, have %s", want, have(n))
	}
	return int(v), n, nil
}

// size reads a byte count in [0, hi]: a plain integer or a number with an
// IEC unit (170MiB, 1.5GiB).
func (p *mfParser) size(n *yaml.Node, path string, hi int64) (int64, error) {
	const want = "a size such as 170MiB or 11GiB"
	n, err := p.scalar(n, path, want)
	if err != nil {
		return 0, err
	}
	v, msg := ParseSize(n.Value)
	if msg != nil {
		return 0, p.errAt(n, path, "want %s, have %s: %v", want, have(n), msg)
	}
	if v > hi {
		return 0, p.errAt(n, path, "%s is larger than %s", n.Value, FormatSize(hi))
	}
	return v, nil
}

// sizeUnits are the IEC units sizes accept. SI units (MB, GB) are refused
// rather than guessed, because GPU memory is quoted both ways and a 7%
// error in placement is worse than an error message.
var sizeUnits = []struct {
	name  string
	shift uint
}{{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"PiB", 50}}

// ParseSize parses a byte count: a plain non-negative integer, or a decimal
// number with an IEC unit (B, KiB, MiB, GiB, TiB, PiB; case-insensitive),
// rounded to whole bytes. It is the size syntax of model files, exported so
// that flags can share it.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-") {
		return 0, errors.New("a size must not be negative")
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	if num == "" {
		return 0, errors.New("not a number with an IEC unit")
	}
	shift := uint(0)
	if unit != "" {
		found := false
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				shift, found = u.shift, true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("unknown unit %q (want B, KiB, MiB, GiB, TiB or PiB)", unit)
		}
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v > math.MaxInt64>>shift {
			return 0, errors.New("too large")
		}
		return v << shift, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, errors.New("not a number with an IEC unit")
	}
	f = math.Round(math.Ldexp(f, int(shift)))
	if !(f < math.MaxInt64) {
		return 0, errors.New("too large")
	}
	return int64(f), nil
}

// FormatSize renders bytes in the largest IEC unit that keeps at least one
// whole unit, with up to two decimals (170MiB, 10.5GiB), the way model files
// write them, so that reports read like their input.
func FormatSize(b int64) string {
	if b < 0 {
		return "-" + FormatSize(-b)
	}
	for i := len(sizeUnits) - 1; i > 0; i-- {
		u := sizeUnits[i]
		if b >= 1<<u.shift {
			s := strconv.FormatFloat(math.Ldexp(float64(b), -int(u.shift)), 'f', 2, 64)
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
			return s + u.name
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}

// checkModelName keeps model names usable as URL path segments (the
// gateway serves /v2/models/<name>), CSV cells and YAML keys.
func checkModelName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxModelNameLen:
		return fmt.Sprintf("is longer than %d bytes", maxModelNameLen)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("%q has character %q; names use letters, digits, '-', '_' and '.'", s, c)
		}
	}
	return ""
}

var (
	modelFileKeys = []string{"parts", "max_rate_per_part", "gpu_memory", "memory_weight", "models", "current", "max_disruption"}
	mfModelKeys   = []string{"name", "rate", "memory"}
	mfMemoryKeys  = []string{"static", "dynamic"}
)

func (p *mfParser) file(root *yaml.Node) (*ModelFile, error) {
	m, err := p.mapping(root, "", "a mapping of model file fields (parts, models, ...)", modelFileKeys)
	if err != nil {
		return nil, err
	}
	pr := &Problem{MaxDisruption: -1}
	mf := &ModelFile{Problem: pr}

	v, ok := m.vals["parts"]
	if !ok {
		return nil, p.errAt(m.node, "parts", "required (the number of sub-clusters or scheduler instances)")
	}
	if pr.Parts, _, err = p.integer(v, "parts", 1, MaxModelFileParts); err != nil {
		return nil, err
	}
	if v, ok := m.vals["max_rate_per_part"]; ok {
		if pr.MaxRatePerPart, err = p.number(v, "max_rate_per_part", math.MaxFloat64); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["gpu_memory"]; ok {
		if pr.GPUMemory, err = p.size(v, "gpu_memory", math.MaxInt64); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["memory_weight"]; ok {
		if pr.MemoryWeight, err = p.number(v, "memory_weight", math.MaxFloat64); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["max_disruption"]; ok {
		if pr.MaxDisruption, err = p.size(v, "max_disruption", math.MaxInt64); err != nil {
			return nil, err
		}
	}

	v, ok = m.vals["models"]
	if !ok {
		return nil, p.errAt(m.node, "models", "required (a list of {name, rate, memory: {static, dynamic}})")
	}
	index := make(map[string]int)
	if pr.Models, err = p.models(v, "models", pr, index); err != nil {
		return nil, err
	}
	if v, ok := m.vals["current"]; ok {
		if pr.Current, err = p.current(v, "current", pr, index); err != nil {
			return nil, err
		}
	} else if _, ok := m.vals["max_disruption"]; ok {
		mf.Warnings = append(mf.Warnings, "max_disruption has no effect without a current assignment")
	}
	return mf, nil
}

func (p *mfParser) models(n *yaml.Node, path string, pr *Problem, index map[string]int) ([]Model, error) {
	seq, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if seq.Kind != yaml.SequenceNode {
		return nil, p.errAt(seq, path, "want a list of models, have %s", have(seq))
	}
	if len(seq.Content) == 0 {
		return nil, p.errAt(seq, path, "no models; a model file lists at least one")
	}
	if len(seq.Content) > MaxModelFileModels {
		return nil, p.errAt(seq, path, "more than %d models", MaxModelFileModels)
	}
	out := make([]Model, 0, len(seq.Content))
	lines := make(map[string]int, len(seq.Content))
	for i, e := range seq.Content {
		ep := fmt.Sprintf("%s[%d]", path, i)
		md, nameNode, err := p.model(e, ep, pr)
		if err != nil {
			return nil, err
		}
		if j, dup := index[md.Name]; dup {
			return nil, p.errAt(nameNode, ep+".name", "duplicate model name %q (%s[%d] at line %d has it too)", md.Name, path, j, lines[md.Name])
		}
		index[md.Name] = i
		lines[md.Name] = nameNode.Line
		out = append(out, md)
	}
	return out, nil
}

func (p *mfParser) model(n *yaml.Node, path string, pr *Problem) (Model, *yaml.Node, error) {
	var md Model
	m, err := p.mapping(n, path, "a model mapping {name, rate, memory: {static, dynamic}}", mfModelKeys)
	if err != nil {
		return md, nil, err
	}
	v, ok := m.vals["name"]
	if !ok {
		return md, nil, p.errAt(m.node, m.at("name"), "required")
	}
	nameNode, err := p.scalar(v, m.at("name"), "a model name")
	if err != nil {
		return md, nil, err
	}
	if msg := checkModelName(nameNode.Value); msg != "" {
		return md, nil, p.errAt(nameNode, m.at("name"), "model name %s", msg)
	}
	md.Name = nameNode.Value
	v, ok = m.vals["rate"]
	if !ok {
		return md, nil, p.errAt(m.node, m.at("rate"), "required (requests per second)")
	}
	if md.Rate, err = p.number(v, m.at("rate"), maxModelRate); err != nil {
		return md, nil, err
	}
	if pr.MaxRatePerPart > 0 && md.Rate > pr.MaxRatePerPart {
		return md, nil, p.errAt(v, m.at("rate"), "%g exceeds max_rate_per_part %g, so no part can take the model", md.Rate, pr.MaxRatePerPart)
	}
	if v, ok := m.vals["memory"]; ok {
		mm, err := p.mapping(v, m.at("memory"), "a mapping {static, dynamic}", mfMemoryKeys)
		if err != nil {
			return md, nil, err
		}
		if v, ok := mm.vals["static"]; ok {
			if md.StaticMemory, err = p.size(v, mm.at("static"), maxModelMemory); err != nil {
				return md, nil, err
			}
		}
		if v, ok := mm.vals["dynamic"]; ok {
			if md.DynamicMemory, err = p.size(v, mm.at("dynamic"), maxModelMemory); err != nil {
				return md, nil, err
			}
		}
		if g := pr.GPUMemory; g > 0 && md.StaticMemory+md.DynamicMemory > g {
			return md, nil, p.errAt(mm.node, mm.path, "static %s + dynamic %s exceeds gpu_memory %s, so no part can hold the model",
				FormatSize(md.StaticMemory), FormatSize(md.DynamicMemory), FormatSize(g))
		}
	}
	return md, nameNode, nil
}

// current reads the current assignment: model name -> part. Models it
// leaves out are new.
func (p *mfParser) current(n *yaml.Node, path string, pr *Problem, index map[string]int) ([]int, error) {
	n, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errAt(n, path, "want a mapping of model name to part, have %s", have(n))
	}
	cur := make([]int, len(pr.Models))
	for i := range cur {
		cur[i] = Unassigned
	}
	keyLine := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := p.resolve(n.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return nil, p.errAt(k, path, "want model names as keys, have %s", have(k))
		}
		name := k.Value
		fp := fieldJoin(path, name)
		idx, ok := index[name]
		if !ok {
			return nil, p.errAt(k, fp, "no model named %q in models", name)
		}
		if prev, ok := keyLine[name]; ok {
			return nil, p.errAt(k, fp, "model %q given twice (first at line %d)", name, prev)
		}
		keyLine[name] = k.Line
		if cur[idx], _, err = p.integer(n.Content[i+1], fp, 0, pr.Parts-1); err != nil {
			return nil, err
		}
	}
	return cur, nil
}
