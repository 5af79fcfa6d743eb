package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/scheduler"
	"github.com/symphony-serving/symphony/scheduler/profile"
)

// MaxFileSize is the largest workload file Parse accepts, in bytes. A real
// workload is a few kilobytes even with hundreds of models; the limit keeps
// a mistaken or hostile input (a trace passed with -f, say) from exhausting
// memory in the YAML parser.
const MaxFileSize = 16 << 20

// Limits on what one workload may expand to. They are far above any real
// workload and exist so that a small file using anchors, aliases or a large
// zoo count cannot make Parse allocate without bound.
const (
	// maxModels bounds the models after zoo expansion.
	maxModels = 100_000
	// maxGPUs bounds cluster.gpus and the sum of gpu_types counts.
	maxGPUs = 1 << 20
	// maxRatePhases bounds the rate phases of all models together.
	maxRatePhases = 16 << 20
	// maxProfileEntries bounds the batch latencies of all distinct profiles
	// together (a profile shared through an alias or a zoo counts once).
	maxProfileEntries = 64 << 20
	// maxWork bounds the YAML nodes visited, aliases counted each time they
	// are followed.
	maxWork = 20_000_000
	// maxMergeDepth bounds merge keys (<<) in merged mappings in merged
	// mappings..., which would otherwise recurse once per mapping.
	maxMergeDepth = 16
	// maxNameLen bounds model and GPU type names.
	maxNameLen = 128
	// maxTraceFileSize bounds a rate trace file; MaxTraceRows rows of
	// "second,rate" fit easily.
	maxTraceFileSize = 1 << 30
	// maxNexusFrontends bounds nexus_frontends.
	maxNexusFrontends = 1 << 16
)

// Defaults for keys a workload file leaves out, so that a minimal file
// (cluster and models) runs as the documented example does.
const (
	DefaultSeed           uint64 = 1
	DefaultDuration              = 30 * time.Second
	DefaultWarmup                = 5 * time.Second
	DefaultNexusFrontends        = 1
)

// DefaultNetwork returns the network delays of a workload without a network
// key: those of the documented example (100us control, 20us per input,
// 100us result), a LAN like the paper's testbed. A network mapping that
// leaves a delay out sets that delay to 0 instead, so that network: {}
// means an ideal network. It is a function so that no caller can change
// the default for everyone.
func DefaultNetwork() scheduler.Delays {
	return scheduler.Delays{
		Ctrl:           100 * time.Microsecond,
		DataPerRequest: 20 * time.Microsecond,
		Result:         100 * time.Microsecond,
	}
}

// Error is a problem at one place in a workload file (or a rate trace). Its
// message names the file, the line and the field, so that a user can fix the
// file without guessing, and callers can still inspect the parts.
type Error struct {
	// Source is the file as named to Parse or ParseRateTrace.
	Source string
	// Line is 1-based; 0 when the problem has no single line (an empty file).
	Line int
	// Field is the path of the field, such as models[1].slo; empty for YAML
	// syntax errors and rate trace rows.
	Field string
	// Msg says what is wrong and, where it helps, what was expected.
	Msg string
	// Err is the underlying error, if any (for example a missing trace file),
	// so that errors.Is(err, fs.ErrNotExist) works.
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

// ParseFile reads and parses the workload file at path. Relative rate_trace
// paths in it are resolved against the file's directory, so a workload and
// its traces can move together.
func ParseFile(path string) (*Workload, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	defer f.Close()
	// Pipes are fine (a process substitution, say), but only up to
	// MaxFileSize, which the limited read enforces.
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, &Error{Source: path, Msg: "is a directory, not a workload file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &Error{Source: path, Msg: err.Error(), Err: err}
	}
	return Parse(data, path)
}

// Parse parses a workload file's contents. source names the file in error
// messages and in Workload.Source; its directory is where relative
// rate_trace paths are looked up ("" means the current directory). Zoos are
// expanded into models appended after the models list, defaults are filled
// in, and the result has passed Validate. Every error is an *Error naming
// the file, the line and the field, except Validate's own.
func Parse(data []byte, source string) (*Workload, error) {
	name := source
	if name == "" {
		name = "workload"
	}
	if len(data) > MaxFileSize {
		return nil, &Error{Source: name, Msg: fmt.Sprintf("file is larger than %d MiB; a workload file is YAML, not a trace", MaxFileSize>>20)}
	}
	root, err := decodeYAML(data, name)
	if err != nil {
		return nil, err
	}
	dir := "."
	if source != "" {
		dir = filepath.Dir(source)
	}
	p := &parser{
		src:      name,
		dir:      dir,
		work:     maxWork,
		phases:   maxRatePhases,
		entries:  maxProfileEntries,
		tables:   make(map[*yaml.Node]profile.Profile),
		zooProfs: make(map[string]profile.Profile),
		traces:   make(map[string][]RatePhase),
	}
	w, err := p.workload(root)
	if err != nil {
		return nil, err
	}
	w.Source = source
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return w, nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// decodeYAML parses data into a node tree: the root mapping of its only
// document. The YAML library is third-party code fed untrusted input, so a
// panic in it becomes an error rather than a crash.
func decodeYAML(data []byte, src string) (root *yaml.Node, err error) {
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
	empty := &Error{Source: src, Msg: "empty workload file (want a YAML mapping with at least cluster and models or zoo)"}
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
		return nil, &Error{Source: src, Line: next.Line, Msg: "more than one YAML document; a workload file holds exactly one"}
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

// parser walks one document's node tree. It holds per-call caches and
// budgets only; nothing outlives the Parse call.
type parser struct {
	src string // for messages
	dir string // base of relative rate_trace paths

	// Budgets, counting down; see the max* constants.
	work    int
	phases  int
	entries int
	nmodels int

	// tables caches profiles by their (alias-resolved) YAML node, so an
	// anchored profile used by many models is built and counted once.
	tables map[*yaml.Node]profile.Profile
	// zooProfs caches bundled profiles by "zoo/model".
	zooProfs map[string]profile.Profile
	// traces caches rate traces by cleaned path.
	traces map[string][]RatePhase
	// runLength is warmup plus duration, which daily_rate curves cover.
	runLength time.Duration
}

// errAt builds an *Error for the field at path whose node is n.
func (p *parser) errAt(n *yaml.Node, path, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{Source: p.src, Line: line, Field: path, Msg: fmt.Sprintf(format, args...)}
}

// resolve follows aliases to the node they name and charges the visit to
// the work budget.
func (p *parser) resolve(n *yaml.Node, path string) (*yaml.Node, error) {
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
		return nil, p.errAt(n, path, "workload too complex: more than %d YAML nodes visited (aliases count each time they are used)", maxWork)
	}
	return n, nil
}

// describe renders a node for "got ..." in messages.
func describe(n *yaml.Node) string {
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

// join builds a field path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// mapNode is a YAML mapping whose keys have been checked against an allowed
// set, with merge keys (<<) applied.
type mapNode struct {
	node *yaml.Node
	path string
	keys map[string]*yaml.Node // key name -> key node
	vals map[string]*yaml.Node // key name -> value node (unresolved)
	// merged holds the mappings already merged in. A mapping merged twice
	// adds nothing, and skipping it keeps a small file of nested merge
	// lists from costing exponential time (and cycles from looping).
	merged map[*yaml.Node]bool
}

// mapping reads n as a mapping with keys from allowed. Unknown keys and keys
// given twice are errors; keys brought in by a merge key are overridden by
// explicit ones, as YAML specifies.
func (p *parser) mapping(n *yaml.Node, path, want string, allowed []string) (*mapNode, error) {
	n, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.errAt(n, path, "want %s, got %s", want, describe(n))
	}
	m := &mapNode{node: n, path: path, keys: make(map[string]*yaml.Node), vals: make(map[string]*yaml.Node)}
	if err := p.collect(m, n, allowed, 0); err != nil {
		return nil, err
	}
	return m, nil
}

// collect adds n's entries to m, then those of the mappings n merges, depth
// first. An entry never overrides one collected before it, which gives
// YAML's precedence: a mapping's own keys, then its merge sources in order.
// depth is 0 for the mapping itself.
func (p *parser) collect(m *mapNode, n *yaml.Node, allowed []string, depth int) error {
	if depth > maxMergeDepth {
		return p.errAt(n, m.path, "merge keys (<<) nested more than %d deep", maxMergeDepth)
	}
	var merges []*yaml.Node
	var own map[string]*yaml.Node // keys of n itself, for duplicates
	if depth > 0 {
		own = make(map[string]*yaml.Node)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		k, err := p.resolve(k, m.path)
		if err != nil {
			return err
		}
		if k.Kind != yaml.ScalarNode {
			return p.errAt(k, m.path, "mapping keys must be plain names, got %s", describe(k))
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		name := k.Value
		if !contains(allowed, name) {
			return p.errAt(k, join(m.path, name), "unknown key %q%s (allowed: %s)", name, suggest(name, allowed), strings.Join(allowed, ", "))
		}
		if depth > 0 {
			if prev, ok := own[name]; ok {
				return p.errAt(k, join(m.path, name), "key %q given twice (first at line %d)", name, prev.Line)
			}
			own[name] = k
		}
		if prev, ok := m.keys[name]; ok {
			if depth == 0 {
				return p.errAt(k, join(m.path, name), "key %q given twice (first at line %d)", name, prev.Line)
			}
			continue
		}
		m.keys[name] = k
		m.vals[name] = v
	}
	for _, v := range merges {
		v, err := p.resolve(v, m.path)
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
			return p.errAt(v, m.path, "merge key (<<) wants a mapping or a list of mappings, got %s", describe(v))
		}
		for _, s := range srcs {
			s, err := p.resolve(s, m.path)
			if err != nil {
				return err
			}
			if s.Kind != yaml.MappingNode {
				return p.errAt(s, m.path, "merge key (<<) wants a mapping or a list of mappings, got %s", describe(s))
			}
			if s == m.node || m.merged[s] {
				continue
			}
			if m.merged == nil {
				m.merged = make(map[*yaml.Node]bool)
			}
			m.merged[s] = true
			if err := p.collect(m, s, allowed, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest returns ` (did you mean "x"?)` for the allowed key closest to
// name, if it is close enough to be a likely typo.
func suggest(name string, allowed []string) string {
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

// has reports whether key was given.
func (m *mapNode) has(key string) bool { _, ok := m.vals[key]; return ok }

// at is the path of key.
func (m *mapNode) at(key string) string { return join(m.path, key) }

// required returns key's value node, or an error at the mapping's line.
func (p *parser) required(m *mapNode, key, hint string) (*yaml.Node, error) {
	v, ok := m.vals[key]
	if !ok {
		return nil, p.errAt(m.node, m.at(key), "required%s", hint)
	}
	return v, nil
}

// scalar resolves n and checks that it is a scalar with a value.
func (p *parser) scalar(n *yaml.Node, path, want string) (*yaml.Node, error) {
	n, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		return nil, p.errAt(n, path, "want %s, got %s", want, describe(n))
	}
	return n, nil
}

func (p *parser) str(n *yaml.Node, path, want string) (string, *yaml.Node, error) {
	n, err := p.scalar(n, path, want)
	if err != nil {
		return "", nil, err
	}
	return n.Value, n, nil
}

// duration reads a Go duration. Bare numbers other than 0 are rejected:
// whether "25" means seconds or milliseconds is exactly the ambiguity the
// unit removes.
func (p *parser) duration(n *yaml.Node, path string) (time.Duration, *yaml.Node, error) {
	n, err := p.scalar(n, path, "a duration such as 25ms")
	if err != nil {
		return 0, nil, err
	}
	d, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		return 0, nil, p.errAt(n, path, "%q is not a duration (want Go syntax such as 25ms)", n.Value)
	}
	return d, n, nil
}

// nonNegDuration is duration that must be >= 0; posDuration must be > 0.
func (p *parser) nonNegDuration(n *yaml.Node, path string) (time.Duration, error) {
	d, n, err := p.duration(n, path)
	if err == nil && d < 0 {
		err = p.errAt(n, path, "must not be negative, got %v", d)
	}
	return d, err
}

func (p *parser) posDuration(n *yaml.Node, path string) (time.Duration, error) {
	d, n, err := p.duration(n, path)
	if err == nil && d <= 0 {
		err = p.errAt(n, path, "must be positive, got %v", d)
	}
	return d, err
}

// float reads a finite number.
func (p *parser) float(n *yaml.Node, path string) (float64, *yaml.Node, error) {
	n, err := p.scalar(n, path, "a number")
	if err != nil {
		return 0, nil, err
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(n.Value), 64)
	if err != nil {
		return 0, nil, p.errAt(n, path, "%q is not a number", n.Value)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, nil, p.errAt(n, path, "%q is not a finite number", n.Value)
	}
	return v, n, nil
}

// nonNegFloat is float that must be >= 0, such as a rate.
func (p *parser) nonNegFloat(n *yaml.Node, path string) (float64, error) {
	v, n, err := p.float(n, path)
	if err == nil && v < 0 {
		err = p.errAt(n, path, "must not be negative, got %g", v)
	}
	return v, err
}

// intIn reads a decimal integer in [lo, hi].
func (p *parser) intIn(n *yaml.Node, path string, lo, hi int) (int, error) {
	n, err := p.scalar(n, path, "an integer")
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(n.Value), 10, 64)
	if err != nil {
		return 0, p.errAt(n, path, "%q is not an integer", n.Value)
	}
	if v < int64(lo) || v > int64(hi) {
		return 0, p.errAt(n, path, "%d is outside %d..%d", v, lo, hi)
	}
	return int(v), nil
}

// sizeUnits are the IEC units sizes accept. SI units (MB, GB) are rejected
// rather than guessed, because GPU memory is quoted both ways and a 7%
// error in placement is worse than an error message.
var sizeUnits = []struct {
	name  string
	shift uint
}{{"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}}

// size reads a byte count: a plain integer, or a number with an IEC unit
// (170MiB, 1.5GiB).
func (p *parser) size(n *yaml.Node, path string) (int64, error) {
	n, err := p.scalar(n, path, "a size such as 170MiB")
	if err != nil {
		return 0, err
	}
	v, msg := parseSize(n.Value)
	if msg != "" {
		return 0, p.errAt(n, path, "%q %s", n.Value, msg)
	}
	return v, nil
}

// parseSize returns the size, or a message completing `"<value>" ...`.
func parseSize(s string) (int64, string) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], strings.TrimSpace(s[i:])
	if strings.HasPrefix(s, "-") {
		return 0, "is negative; a size must be at least 0"
	}
	if num == "" {
		return 0, "is not a size (want a number with an IEC unit such as 170MiB or 40GiB)"
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
			return 0, fmt.Sprintf("has unknown unit %q (want B, KiB, MiB, GiB or TiB)", unit)
		}
	}
	if !strings.Contains(num, ".") {
		v, err := strconv.ParseInt(num, 10, 64)
		if err != nil || v > math.MaxInt64>>shift {
			return 0, "is too large"
		}
		return v << shift, ""
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, "is not a size (want a number with an IEC unit such as 170MiB or 40GiB)"
	}
	f = math.Round(math.Ldexp(f, int(shift)))
	if !(f < math.MaxInt64) {
		return 0, "is too large"
	}
	return int64(f), ""
}

// validName keeps model and GPU type names usable as URL path segments (the
// KServe gateway serves /v2/models/<name>), CSV cells and file names.
func validName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxNameLen:
		return fmt.Sprintf("is longer than %d bytes", maxNameLen)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Sprintf("%q has character %q; names use letters, digits, '-', '_' and '.'", s, c)
		}
	}
	return ""
}

var topKeys = []string{"seed", "duration", "warmup", "cluster", "network", "models", "zoo", "policy", "schedulable", "drop_policy", "schedule_ahead", "nexus_frontends", "autoscale_window", "epoch"}

// workload walks the root mapping.
func (p *parser) workload(root *yaml.Node) (*Workload, error) {
	m, err := p.mapping(root, "", "a mapping of workload fields (seed, duration, cluster, models, ...)", topKeys)
	if err != nil {
		return nil, err
	}
	w := &Workload{
		Seed:           DefaultSeed,
		Duration:       DefaultDuration,
		Warmup:         DefaultWarmup,
		Network:        DefaultNetwork(),
		Policy:         scheduler.PolicySymphony,
		NexusFrontends: DefaultNexusFrontends,
	}
	if v, ok := m.vals["seed"]; ok {
		n, err := p.scalar(v, "seed", "an integer")
		if err != nil {
			return nil, err
		}
		if w.Seed, err = strconv.ParseUint(strings.TrimSpace(n.Value), 10, 64); err != nil {
			return nil, p.errAt(n, "seed", "%q is not a non-negative integer", n.Value)
		}
	}
	if v, ok := m.vals["duration"]; ok {
		if w.Duration, err = p.posDuration(v, "duration"); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["warmup"]; ok {
		if w.Warmup, err = p.nonNegDuration(v, "warmup"); err != nil {
			return nil, err
		}
	}
	if w.Warmup > math.MaxInt64-w.Duration {
		return nil, p.errAt(m.node, "duration", "duration plus warmup overflows")
	}
	v, err := p.required(m, "cluster", " (give gpus: N or gpu_types)")
	if err != nil {
		return nil, err
	}
	if w.Cluster, err = p.cluster(v, "cluster"); err != nil {
		return nil, err
	}
	if v, ok := m.vals["network"]; ok {
		if w.Network, err = p.network(v, "network"); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["policy"]; ok {
		if w.Policy, err = enumField(p, v, "policy", "a policy name", scheduler.ParsePolicy); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["schedulable"]; ok {
		if w.Schedulable, err = enumField(p, v, "schedulable", "a schedulable condition", scheduler.ParseSchedulable); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["drop_policy"]; ok {
		if w.Drop, err = enumField(p, v, "drop_policy", "a drop policy", scheduler.ParseDropPolicy); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["schedule_ahead"]; ok {
		if w.ScheduleAhead, err = p.nonNegDuration(v, "schedule_ahead"); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["nexus_frontends"]; ok {
		if w.NexusFrontends, err = p.intIn(v, "nexus_frontends", 1, maxNexusFrontends); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["autoscale_window"]; ok {
		if w.AutoscaleWindow, err = p.nonNegDuration(v, "autoscale_window"); err != nil {
			return nil, err
		}
	}

	if v, ok := m.vals["epoch"]; ok {
		e, err := p.epoch(v, "epoch")
		if err != nil {
			return nil, err
		}
		w.Epoch = &e
	}

	p.runLength = w.Warmup + w.Duration
	names := make(map[string]string) // model name -> where it was defined
	if v, ok := m.vals["models"]; ok {
		if w.Models, err = p.models(v, "models", names); err != nil {
			return nil, err
		}
	}
	if v, ok := m.vals["zoo"]; ok {
		if w.Models, err = p.zoos(v, "zoo", w.Models, names); err != nil {
			return nil, err
		}
	}
	if len(w.Models) == 0 {
		return nil, p.errAt(m.node, "models", "no models: give a models list or a zoo")
	}
	return w, nil
}

var clusterKeys = []string{"gpus", "gpu_types"}
var gpuTypeKeys = []string{"name", "count", "memory", "price_per_hour"}

func (p *parser) cluster(n *yaml.Node, path string) (Cluster, error) {
	var c Cluster
	m, err := p.mapping(n, path, "a mapping such as {gpus: 8}", clusterKeys)
	if err != nil {
		return c, err
	}
	if !m.has("gpus") && !m.has("gpu_types") {
		return c, p.errAt(m.node, path, "needs gpus or gpu_types")
	}
	if v, ok := m.vals["gpu_types"]; ok {
		tp := m.at("gpu_types")
		seq, err := p.resolve(v, tp)
		if err != nil {
			return c, err
		}
		if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
			return c, p.errAt(seq, tp, "want a non-empty list of {name, count, memory, price_per_hour}, got %s", describe(seq))
		}
		seen := make(map[string]int)
		for i, e := range seq.Content {
			ep := index(tp, i)
			em, err := p.mapping(e, ep, "a mapping {name, count, memory, price_per_hour}", gpuTypeKeys)
			if err != nil {
				return c, err
			}
			var g GPUType
			v, err := p.required(em, "name", "")
			if err != nil {
				return c, err
			}
			name, nn, err := p.str(v, em.at("name"), "a name")
			if err != nil {
				return c, err
			}
			if msg := validName(name); msg != "" {
				return c, p.errAt(nn, em.at("name"), "GPU type name %s", msg)
			}
			if line, dup := seen[name]; dup {
				return c, p.errAt(nn, em.at("name"), "GPU type %q listed twice (first at line %d)", name, line)
			}
			seen[name] = nn.Line
			g.Name = name
			if v, err = p.required(em, "count", ""); err != nil {
				return c, err
			}
			if g.Count, err = p.intIn(v, em.at("count"), 1, maxGPUs); err != nil {
				return c, err
			}
			if v, ok := em.vals["memory"]; ok {
				if g.Memory, err = p.size(v, em.at("memory")); err != nil {
					return c, err
				}
			}
			if v, ok := em.vals["price_per_hour"]; ok {
				if g.PricePerHour, err = p.nonNegFloat(v, em.at("price_per_hour")); err != nil {
					return c, err
				}
			}
			c.GPUs += g.Count
			if c.GPUs > maxGPUs {
				return c, p.errAt(em.node, ep, "more than %d GPUs in all", maxGPUs)
			}
			c.GPUTypes = append(c.GPUTypes, g)
		}
	}
	if v, ok := m.vals["gpus"]; ok {
		gpus, err := p.intIn(v, m.at("gpus"), 1, maxGPUs)
		if err != nil {
			return c, err
		}
		if c.GPUTypes != nil && gpus != c.GPUs {
			return c, p.errAt(m.keys["gpus"], m.at("gpus"), "%d disagrees with the %d GPUs that gpu_types lists (give one or make them agree)", gpus, c.GPUs)
		}
		c.GPUs = gpus
	}
	return c, nil
}

var networkKeys = []string{"ctrl_delay", "data_delay_per_request", "result_delay"}

// network reads the delays; a delay left out of a given mapping is 0, so
// that network: {} means an ideal network.
func (p *parser) network(n *yaml.Node, path string) (scheduler.Delays, error) {
	var d scheduler.Delays
	m, err := p.mapping(n, path, "a mapping {ctrl_delay, data_delay_per_request, result_delay}", networkKeys)
	if err != nil {
		return d, err
	}
	for _, f := range []struct {
		key string
		dst *time.Duration
	}{{"ctrl_delay", &d.Ctrl}, {"data_delay_per_request", &d.DataPerRequest}, {"result_delay", &d.Result}} {
		if v, ok := m.vals[f.key]; ok {
			if *f.dst, err = p.nonNegDuration(v, m.at(f.key)); err != nil {
				return d, err
			}
		}
	}
	return d, nil
}

var epochKeys = []string{"interval", "model_load_time", "parts", "headroom", "max_disruption", "max_rate_per_part", "gpu_memory", "rebalance_above", "engine"}

// epoch reads the epoch job's settings; fields left out keep DefaultEpoch's
// values, and interval is required.
func (p *parser) epoch(n *yaml.Node, path string) (Epoch, error) {
	e := DefaultEpoch()
	m, err := p.mapping(n, path, "a mapping {interval, model_load_time, parts, headroom, max_disruption, ...}", epochKeys)
	if err != nil {
		return e, err
	}
	v, err := p.required(m, "interval", " (how often the epoch job runs, such as 5m)")
	if err != nil {
		return e, err
	}
	if e.Interval, err = p.posDuration(v, m.at("interval")); err != nil {
		return e, err
	}
	if v, ok := m.vals["model_load_time"]; ok {
		if e.ModelLoadTime, err = p.nonNegDuration(v, m.at("model_load_time")); err != nil {
			return e, err
		}
	}
	if v, ok := m.vals["parts"]; ok {
		if e.Parts, err = p.intIn(v, m.at("parts"), 1, maxModels); err != nil {
			return e, err
		}
	}
	if v, ok := m.vals["headroom"]; ok {
		if e.Headroom, err = p.nonNegFloat(v, m.at("headroom")); err != nil {
			return e, err
		}
	}
	if v, ok := m.vals["max_disruption"]; ok {
		if e.MaxDisruption, err = p.size(v, m.at("max_disruption")); err != nil {
			return e, err
		}
	}
	if v, ok := m.vals["rebalance_above"]; ok {
		if e.RebalanceAbove, err = p.nonNegFloat(v, m.at("rebalance_above")); err != nil {
			return e, err
		}
	}
	if v, ok := m.vals["max_rate_per_part"]; ok {
		if e.MaxRatePerPart, err = p.nonNegFloat(v, m.at("max_rate_per_part")); err != nil {
			return e, err
		}
	}
	if v, ok := m.vals["gpu_memory"]; ok {
		if e.GPUMemory, err = p.size(v, m.at("gpu_memory")); err != nil {
			return e, err
		}
	}
	if v, ok := m.vals["engine"]; ok {
		s, sn, err := p.str(v, m.at("engine"), "an engine name")
		if err != nil {
			return e, err
		}
		if !contains(EpochEngines, s) {
			return e, p.errAt(sn, m.at("engine"), "%q is not an engine (want one of %s)%s", s, strings.Join(EpochEngines, ", "), suggest(s, EpochEngines))
		}
		e.Engine = s
	}
	return e, nil
}

var modelKeys = []string{"name", "profile", "memory", "slo", "rate", "rates", "rate_trace", "daily_rate", "arrival"}

func (p *parser) models(n *yaml.Node, path string, names map[string]string) ([]Model, error) {
	seq, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if seq.Kind != yaml.SequenceNode {
		return nil, p.errAt(seq, path, "want a list of models, got %s", describe(seq))
	}
	if len(seq.Content) > maxModels {
		return nil, p.errAt(seq, path, "more than %d models", maxModels)
	}
	out := make([]Model, 0, len(seq.Content))
	for i, e := range seq.Content {
		ep := index(path, i)
		md, nameNode, err := p.model(e, ep)
		if err != nil {
			return nil, err
		}
		if where, dup := names[md.Name]; dup {
			return nil, p.errAt(nameNode, join(ep, "name"), "duplicate model name %q (%s has it too)", md.Name, where)
		}
		names[md.Name] = fmt.Sprintf("%s at line %d", ep, nameNode.Line)
		p.nmodels++
		out = append(out, md)
	}
	return out, nil
}

func (p *parser) model(n *yaml.Node, path string) (Model, *yaml.Node, error) {
	var md Model
	m, err := p.mapping(n, path, "a model mapping {name, profile, slo, rate, ...}", modelKeys)
	if err != nil {
		return md, nil, err
	}
	v, err := p.required(m, "name", "")
	if err != nil {
		return md, nil, err
	}
	name, nameNode, err := p.str(v, m.at("name"), "a model name")
	if err != nil {
		return md, nil, err
	}
	if msg := validName(name); msg != "" {
		return md, nil, p.errAt(nameNode, m.at("name"), "model name %s", msg)
	}
	md.Name = name

	if v, err = p.required(m, "profile", " (give {alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model>)"); err != nil {
		return md, nil, err
	}
	var spec *profile.ModelSpec
	if md.Profile, spec, err = p.profile(v, m.at("profile")); err != nil {
		return md, nil, err
	}
	if spec != nil {
		md.SLO = spec.SLO
		md.StaticMemory, md.DynamicMemory = spec.StaticMemory, spec.DynamicMemory
	}
	if v, ok := m.vals["memory"]; ok {
		if md.StaticMemory, md.DynamicMemory, err = p.memory(v, m.at("memory")); err != nil {
			return md, nil, err
		}
	}
	if v, ok := m.vals["slo"]; ok {
		if md.SLO, err = p.posDuration(v, m.at("slo")); err != nil {
			return md, nil, err
		}
	} else if spec == nil {
		return md, nil, p.errAt(m.node, m.at("slo"), "required (a duration such as 25ms) unless the profile is a zoo reference")
	}
	if md.Rates, err = p.modelRates(m); err != nil {
		return md, nil, err
	}
	if v, ok := m.vals["arrival"]; ok {
		if md.Arrival, err = p.arrival(v, m.at("arrival")); err != nil {
			return md, nil, err
		}
	}
	return md, nameNode, nil
}

var memoryKeys = []string{"static", "dynamic"}

func (p *parser) memory(n *yaml.Node, path string) (static, dynamic int64, err error) {
	m, err := p.mapping(n, path, "a mapping {static, dynamic}", memoryKeys)
	if err != nil {
		return 0, 0, err
	}
	if v, ok := m.vals["static"]; ok {
		if static, err = p.size(v, m.at("static")); err != nil {
			return 0, 0, err
		}
	}
	if v, ok := m.vals["dynamic"]; ok {
		if dynamic, err = p.size(v, m.at("dynamic")); err != nil {
			return 0, 0, err
		}
	}
	return static, dynamic, nil
}

var profileKeys = []string{"alpha", "beta", "max_batch", "batch_latency"}

// profile reads a model's profile. For a zoo reference it also returns the
// zoo's spec, whose SLO and memory the model inherits unless it gives its
// own.
func (p *parser) profile(n *yaml.Node, path string) (profile.Profile, *profile.ModelSpec, error) {
	n, err := p.resolve(n, path)
	if err != nil {
		return profile.Profile{}, nil, err
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return p.zooRef(n, path)
	}
	if pr, ok := p.tables[n]; ok {
		return pr, nil, nil
	}
	m, err := p.mapping(n, path, "{alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model>", profileKeys)
	if err != nil {
		return profile.Profile{}, nil, err
	}
	var pr profile.Profile
	if v, ok := m.vals["batch_latency"]; ok {
		for _, k := range []string{"alpha", "beta", "max_batch"} {
			if m.has(k) {
				return pr, nil, p.errAt(m.keys[k], m.at(k), "batch_latency and %s are mutually exclusive (a table profile lists every batch size)", k)
			}
		}
		if pr, err = p.table(v, m.at("batch_latency")); err != nil {
			return pr, nil, err
		}
	} else {
		pr, err = p.linear(m)
		if err != nil {
			return pr, nil, err
		}
	}
	p.tables[n] = pr
	return pr, nil, nil
}

func (p *parser) linear(m *mapNode) (profile.Profile, error) {
	hint := " (a linear profile gives alpha and beta: latency of batch b = alpha*b + beta)"
	av, err := p.required(m, "alpha", hint)
	if err != nil {
		return profile.Profile{}, err
	}
	bv, err := p.required(m, "beta", hint)
	if err != nil {
		return profile.Profile{}, err
	}
	alpha, err := p.nonNegDuration(av, m.at("alpha"))
	if err != nil {
		return profile.Profile{}, err
	}
	beta, err := p.nonNegDuration(bv, m.at("beta"))
	if err != nil {
		return profile.Profile{}, err
	}
	if alpha == 0 && beta == 0 {
		return profile.Profile{}, p.errAt(m.node, m.path, "alpha and beta are both zero")
	}
	maxBatch := profile.DefaultMaxBatch
	if v, ok := m.vals["max_batch"]; ok {
		if maxBatch, err = p.intIn(v, m.at("max_batch"), 1, 1<<16); err != nil {
			return profile.Profile{}, err
		}
	}
	// ℓ(maxBatch) must not overflow a Duration.
	if alpha > 0 && (math.MaxInt64-beta)/alpha < time.Duration(maxBatch) {
		return profile.Profile{}, p.errAt(m.node, m.path, "alpha*max_batch + beta overflows")
	}
	if err := p.spendEntries(m.node, m.path, maxBatch); err != nil {
		return profile.Profile{}, err
	}
	pr, err := profile.Linear(alpha, beta, maxBatch)
	if err != nil {
		return pr, p.errAt(m.node, m.path, "%s", strings.TrimPrefix(err.Error(), "profile: "))
	}
	return pr, nil
}

func (p *parser) table(n *yaml.Node, path string) (profile.Profile, error) {
	seq, err := p.resolve(n, path)
	if err != nil {
		return profile.Profile{}, err
	}
	if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
		return profile.Profile{}, p.errAt(seq, path, "want a non-empty list of durations (latency of batch 1, 2, ...), got %s", describe(seq))
	}
	if len(seq.Content) > 1<<16 {
		return profile.Profile{}, p.errAt(seq, path, "more than 65536 batch sizes")
	}
	if err := p.spendEntries(seq, path, len(seq.Content)); err != nil {
		return profile.Profile{}, err
	}
	lat := make([]time.Duration, len(seq.Content))
	for i, e := range seq.Content {
		ep := index(path, i)
		d, en, err := p.duration(e, ep)
		if err != nil {
			return profile.Profile{}, err
		}
		if d <= 0 {
			return profile.Profile{}, p.errAt(en, ep, "latency of batch %d must be positive, got %v", i+1, d)
		}
		if i > 0 && d < lat[i-1] {
			return profile.Profile{}, p.errAt(en, ep, "latency of batch %d (%v) is below that of batch %d (%v); latency must not fall as batches grow", i+1, d, i, lat[i-1])
		}
		lat[i] = d
	}
	pr, err := profile.Table(lat)
	if err != nil {
		return pr, p.errAt(seq, path, "%s", strings.TrimPrefix(err.Error(), "profile: "))
	}
	return pr, nil
}

func (p *parser) spendEntries(n *yaml.Node, path string, k int) error {
	if k > p.entries {
		return p.errAt(n, path, "workload too large: more than %d batch latencies over all profiles", maxProfileEntries)
	}
	p.entries -= k
	return nil
}

// zooRef reads a profile given as zoo:<zoo>/<model>.
func (p *parser) zooRef(n *yaml.Node, path string) (profile.Profile, *profile.ModelSpec, error) {
	const want = "(want {alpha, beta}, {batch_latency: [...]} or zoo:<zoo>/<model> such as zoo:1080ti/ResNet50)"
	ref, ok := strings.CutPrefix(strings.TrimSpace(n.Value), "zoo:")
	if !ok {
		return profile.Profile{}, nil, p.errAt(n, path, "%q is not a profile %s", n.Value, want)
	}
	zooName, modelName, ok := strings.Cut(ref, "/")
	if !ok || zooName == "" || modelName == "" {
		return profile.Profile{}, nil, p.errAt(n, path, "%q is not a zoo reference %s", n.Value, want)
	}
	specs, err := profile.Zoo(zooName)
	if err != nil {
		return profile.Profile{}, nil, p.errAt(n, path, "unknown zoo %q (known: %s)", zooName, strings.Join(profile.ZooNames(), ", "))
	}
	i, msg := findSpec(specs, modelName)
	if msg != "" {
		return profile.Profile{}, nil, p.errAt(n, path, "zoo %s %s", zooName, msg)
	}
	spec := specs[i]
	return p.zooProfile(strings.ToLower(zooName), spec), &spec, nil
}

// findSpec finds a model in a zoo by exact name, or explains the miss.
func findSpec(specs []profile.ModelSpec, name string) (int, string) {
	for i, s := range specs {
		if s.Name == name {
			return i, ""
		}
	}
	for _, s := range specs {
		if strings.EqualFold(s.Name, name) {
			return -1, fmt.Sprintf("has no model %q (did you mean %s?)", name, s.Name)
		}
	}
	all := make([]string, len(specs))
	for i, s := range specs {
		all[i] = s.Name
	}
	return -1, fmt.Sprintf("has no model %q (it has %s)", name, strings.Join(all, ", "))
}

// zooProfile returns the spec's profile, built once per Parse and shared:
// profiles are immutable, and a zoo expanded to thousands of copies would
// otherwise hold thousands of identical tables.
func (p *parser) zooProfile(zoo string, spec profile.ModelSpec) profile.Profile {
	key := zoo + "/" + spec.Name
	pr, ok := p.zooProfs[key]
	if !ok {
		pr = spec.Profile()
		p.zooProfs[key] = pr
	}
	return pr
}

// modelRates reads exactly one of rate, rates and rate_trace.
func (p *parser) modelRates(m *mapNode) ([]RatePhase, error) {
	var given []string
	for _, k := range []string{"rate", "rates", "rate_trace", "daily_rate"} {
		if m.has(k) {
			given = append(given, k)
		}
	}
	switch len(given) {
	case 0:
		return nil, p.errAt(m.node, m.path, "needs one of rate, rates, rate_trace or daily_rate")
	case 1:
	default:
		// Point at whichever of the two comes later in the file.
		k := given[1]
		if m.keys[given[0]].Line > m.keys[k].Line {
			k = given[0]
		}
		return nil, p.errAt(m.keys[k], m.at(k), "%s and %s are mutually exclusive; give exactly one of rate, rates, rate_trace or daily_rate", given[0], given[1])
	}
	switch k := given[0]; k {
	case "rate":
		r, err := p.nonNegFloat(m.vals[k], m.at(k))
		if err != nil {
			return nil, err
		}
		if err := p.spendPhases(m.keys[k], m.at(k), 1); err != nil {
			return nil, err
		}
		return []RatePhase{{Rate: r}}, nil
	case "rates":
		ph, err := p.phaseList(m.vals[k], m.at(k), 1)
		if err != nil {
			return nil, err
		}
		return ph, nil
	case "daily_rate":
		return p.dailyRate(m.vals[k], m.at(k))
	default:
		return p.rateTrace(m.vals[k], m.at(k))
	}
}

var dailyKeys = []string{"low", "high", "period", "peak_at", "step"}

// dailyRate reads {low, high, period, peak_at, step}: a rate that follows a
// raised cosine between low and high, peaking at peak_at and repeating every
// period, held constant for each step. It expands into one phase per step
// over the whole run, so it charges the phase budget like a rates list.
func (p *parser) dailyRate(n *yaml.Node, path string) ([]RatePhase, error) {
	m, err := p.mapping(n, path, "a mapping {low, high, period, peak_at, step}", dailyKeys)
	if err != nil {
		return nil, err
	}
	var d DailyRate
	for _, f := range []struct {
		key string
		dst *float64
	}{{"low", &d.Low}, {"high", &d.High}} {
		v, err := p.required(m, f.key, " (requests per second)")
		if err != nil {
			return nil, err
		}
		if *f.dst, err = p.nonNegFloat(v, m.at(f.key)); err != nil {
			return nil, err
		}
	}
	if d.High < d.Low {
		return nil, p.errAt(m.keys["high"], m.at("high"), "%g is below low %g", d.High, d.Low)
	}
	v, err := p.required(m, "period", " (such as 24h)")
	if err != nil {
		return nil, err
	}
	if d.Period, err = p.posDuration(v, m.at("period")); err != nil {
		return nil, err
	}
	if v, ok := m.vals["peak_at"]; ok {
		if d.PeakAt, err = p.nonNegDuration(v, m.at("peak_at")); err != nil {
			return nil, err
		}
	}
	d.Step = time.Minute
	if v, ok := m.vals["step"]; ok {
		if d.Step, err = p.posDuration(v, m.at("step")); err != nil {
			return nil, err
		}
	}
	k := int64(p.runLength/d.Step) + 1
	if k > int64(p.phases) {
		return nil, p.errAt(m.node, path, "workload too large: a step of %v over %v makes more than %d rate phases over all models", d.Step, p.runLength, maxRatePhases)
	}
	if err := p.spendPhases(m.node, path, int(k)); err != nil {
		return nil, err
	}
	return d.Phases(p.runLength), nil
}

func (p *parser) spendPhases(n *yaml.Node, path string, k int) error {
	if k > p.phases {
		return p.errAt(n, path, "workload too large: more than %d rate phases over all models", maxRatePhases)
	}
	p.phases -= k
	return nil
}

var phaseKeys = []string{"duration", "rate"}

// phaseList reads [{duration, rate}, ...]. Every phase but the last needs a
// positive duration; the last may omit it, and holds its rate until the end
// either way. copies is how many models will get the list (a zoo's
// total_rates), charged to the phase budget up front.
func (p *parser) phaseList(n *yaml.Node, path string, copies int) ([]RatePhase, error) {
	seq, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
		return nil, p.errAt(seq, path, "want a non-empty list of {duration, rate}, got %s", describe(seq))
	}
	if len(seq.Content) > p.phases/copies {
		return nil, p.errAt(seq, path, "workload too large: more than %d rate phases over all models", maxRatePhases)
	}
	p.phases -= len(seq.Content) * copies
	out := make([]RatePhase, len(seq.Content))
	var total time.Duration
	for i, e := range seq.Content {
		ep := index(path, i)
		m, err := p.mapping(e, ep, "a phase {duration, rate}", phaseKeys)
		if err != nil {
			return nil, err
		}
		last := i == len(seq.Content)-1
		if v, ok := m.vals["duration"]; ok {
			d, err := p.posDuration(v, m.at("duration"))
			if err != nil {
				return nil, err
			}
			if d > math.MaxInt64-total {
				return nil, p.errAt(m.keys["duration"], m.at("duration"), "phase durations add up to more than %v", time.Duration(math.MaxInt64))
			}
			total += d
			out[i].Duration = d
		} else if !last {
			return nil, p.errAt(m.node, m.at("duration"), "required on every phase but the last")
		}
		v, err := p.required(m, "rate", " (requests per second)")
		if err != nil {
			return nil, err
		}
		if out[i].Rate, err = p.nonNegFloat(v, m.at("rate")); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// rateTrace loads a per-second rate trace, relative to the workload file.
func (p *parser) rateTrace(n *yaml.Node, path string) ([]RatePhase, error) {
	name, sn, err := p.str(n, path, "a CSV file name")
	if err != nil {
		return nil, err
	}
	file := name
	if !filepath.IsAbs(file) {
		file = filepath.Join(p.dir, file)
	}
	file = filepath.Clean(file)
	phases, ok := p.traces[file]
	if !ok {
		if phases, err = readTrace(file); err != nil {
			var te *Error
			if errors.As(err, &te) && te.Source == file {
				// A problem inside the trace: keep its own file:line.
				return nil, &Error{Source: p.src, Line: sn.Line, Field: path, Msg: err.Error(), Err: err}
			}
			return nil, &Error{Source: p.src, Line: sn.Line, Field: path, Msg: fmt.Sprintf("cannot read rate trace: %v", err), Err: err}
		}
		p.traces[file] = phases
	}
	if err := p.spendPhases(sn, path, len(phases)); err != nil {
		return nil, err
	}
	// Each model gets its own copy, so that changing one model's rates
	// (as a caller building variants might) never changes another's.
	return append([]RatePhase(nil), phases...), nil
}

// readTrace opens only regular files: a FIFO or a device named by mistake
// would block or never end.
func readTrace(file string) ([]RatePhase, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	switch {
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file", file)
	case fi.Size() == 0:
		return nil, fmt.Errorf("%s is empty", file)
	case fi.Size() > maxTraceFileSize:
		return nil, fmt.Errorf("%s is larger than %d MiB", file, maxTraceFileSize>>20)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseRateTrace(io.LimitReader(f, fi.Size()), file)
}

// arrival reads poisson, gamma:<shape> or const.
func (p *parser) arrival(n *yaml.Node, path string) (Arrival, error) {
	const want = "(want poisson, gamma:<shape> such as gamma:0.3, or const)"
	s, sn, err := p.str(n, path, "an arrival process "+want)
	if err != nil {
		return Arrival{}, err
	}
	s = strings.TrimSpace(s)
	switch {
	case s == "poisson":
		return Arrival{Kind: ArrivalPoisson}, nil
	case s == "const":
		return Arrival{Kind: ArrivalConstant}, nil
	case strings.HasPrefix(s, "gamma:"):
		shape, err := strconv.ParseFloat(strings.TrimSpace(s[len("gamma:"):]), 64)
		if err != nil || math.IsNaN(shape) || math.IsInf(shape, 0) || shape <= 0 {
			return Arrival{}, p.errAt(sn, path, "%q: gamma shape must be a positive number, such as gamma:0.3", s)
		}
		return Arrival{Kind: ArrivalGamma, Shape: shape}, nil
	}
	return Arrival{}, p.errAt(sn, path, "unknown arrival %q %s", s, want)
}

var zooKeys = []string{"profiles", "count", "select", "total_rate", "total_rates", "popularity", "arrival", "slo_scale", "slo", "name_prefix"}

// zoos reads zoo: a single zoo mapping or a list of them, and appends their
// models to models.
func (p *parser) zoos(n *yaml.Node, path string, models []Model, names map[string]string) ([]Model, error) {
	n, err := p.resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.SequenceNode {
		return p.zoo(n, path, models, names)
	}
	for i, e := range n.Content {
		if models, err = p.zoo(e, index(path, i), models, names); err != nil {
			return nil, err
		}
	}
	return models, nil
}

// zoo expands one zoo entry. Model i takes spec i mod len(list); when count
// exceeds the list, every name gets the copy number i/len(list) as a suffix
// so that names stay unique. Rates follow the popularity law, model 0 being
// the most popular under zipf.
func (p *parser) zoo(n *yaml.Node, path string, models []Model, names map[string]string) ([]Model, error) {
	m, err := p.mapping(n, path, "a zoo mapping {profiles, total_rate, ...}", zooKeys)
	if err != nil {
		return nil, err
	}
	v, err := p.required(m, "profiles", fmt.Sprintf(" (a bundled zoo: %s)", strings.Join(profile.ZooNames(), ", ")))
	if err != nil {
		return nil, err
	}
	zooName, zn, err := p.str(v, m.at("profiles"), "a zoo name")
	if err != nil {
		return nil, err
	}
	specs, err := profile.Zoo(zooName)
	if err != nil {
		return nil, p.errAt(zn, m.at("profiles"), "unknown zoo %q (known: %s)", zooName, strings.Join(profile.ZooNames(), ", "))
	}
	zooName = strings.ToLower(zooName)

	list := specs
	if v, ok := m.vals["select"]; ok {
		sp := m.at("select")
		seq, err := p.resolve(v, sp)
		if err != nil {
			return nil, err
		}
		if seq.Kind != yaml.SequenceNode || len(seq.Content) == 0 {
			return nil, p.errAt(seq, sp, "want a non-empty list of model names from zoo %s, got %s", zooName, describe(seq))
		}
		list = nil
		picked := make(map[string]int)
		for i, e := range seq.Content {
			ep := index(sp, i)
			name, en, err := p.str(e, ep, "a model name")
			if err != nil {
				return nil, err
			}
			j, msg := findSpec(specs, name)
			if msg != "" {
				return nil, p.errAt(en, ep, "zoo %s %s", zooName, msg)
			}
			if line, dup := picked[name]; dup {
				return nil, p.errAt(en, ep, "%q selected twice (first at line %d); use count for copies", name, line)
			}
			picked[name] = en.Line
			list = append(list, specs[j])
		}
	}

	count := len(list)
	room := maxModels - p.nmodels
	if v, ok := m.vals["count"]; ok {
		if count, err = p.intIn(v, m.at("count"), 1, math.MaxInt32); err != nil {
			return nil, err
		}
		if count > room {
			return nil, p.errAt(m.keys["count"], m.at("count"), "%d would make more than %d models in all", count, maxModels)
		}
	} else if count > room {
		return nil, p.errAt(m.node, path, "more than %d models in all", maxModels)
	}

	weights := make([]float64, count)
	pop := "even"
	var popNode *yaml.Node
	if v, ok := m.vals["popularity"]; ok {
		if pop, popNode, err = p.str(v, m.at("popularity"), "a popularity law"); err != nil {
			return nil, err
		}
	}
	switch s := strings.TrimSpace(pop); {
	case s == "even":
		for i := range weights {
			weights[i] = 1 / float64(count)
		}
	case strings.HasPrefix(s, "zipf:"):
		z, err := strconv.ParseFloat(strings.TrimSpace(s[len("zipf:"):]), 64)
		if err != nil || math.IsNaN(z) || math.IsInf(z, 0) || z <= 0 {
			return nil, p.errAt(popNode, m.at("popularity"), "%q: zipf exponent must be a positive number, such as zipf:0.9", s)
		}
		var sum float64
		for i := range weights {
			weights[i] = math.Pow(float64(i+1), -z)
			sum += weights[i]
		}
		for i := range weights {
			weights[i] /= sum
		}
	default:
		return nil, p.errAt(popNode, m.at("popularity"), "unknown popularity %q (want even or zipf:<s> such as zipf:0.9)", s)
	}

	var base []RatePhase
	switch {
	case m.has("total_rate") && m.has("total_rates"):
		k := "total_rates"
		if m.keys["total_rate"].Line > m.keys[k].Line {
			k = "total_rate"
		}
		return nil, p.errAt(m.keys[k], m.at(k), "total_rate and total_rates are mutually exclusive")
	case m.has("total_rate"):
		r, err := p.nonNegFloat(m.vals["total_rate"], m.at("total_rate"))
		if err != nil {
			return nil, err
		}
		if err := p.spendPhases(m.keys["total_rate"], m.at("total_rate"), count); err != nil {
			return nil, err
		}
		base = []RatePhase{{Rate: r}}
	case m.has("total_rates"):
		if base, err = p.phaseList(m.vals["total_rates"], m.at("total_rates"), count); err != nil {
			return nil, err
		}
	default:
		return nil, p.errAt(m.node, m.at("total_rate"), "required (the aggregate requests per second), or give total_rates")
	}

	var arr Arrival
	if v, ok := m.vals["arrival"]; ok {
		if arr, err = p.arrival(v, m.at("arrival")); err != nil {
			return nil, err
		}
	}

	var slo time.Duration
	scale := 1.0
	if m.has("slo") && m.has("slo_scale") {
		return nil, p.errAt(m.keys["slo_scale"], m.at("slo_scale"), "slo and slo_scale are mutually exclusive (slo replaces every zoo SLO)")
	}
	if v, ok := m.vals["slo"]; ok {
		if slo, err = p.posDuration(v, m.at("slo")); err != nil {
			return nil, err
		}
	}
	var scaleNode *yaml.Node
	if v, ok := m.vals["slo_scale"]; ok {
		if scale, scaleNode, err = p.float(v, m.at("slo_scale")); err != nil {
			return nil, err
		}
		if scale <= 0 {
			return nil, p.errAt(scaleNode, m.at("slo_scale"), "must be positive, got %g", scale)
		}
	}

	prefix := ""
	if v, ok := m.vals["name_prefix"]; ok {
		var pn *yaml.Node
		if prefix, pn, err = p.str(v, m.at("name_prefix"), "a name prefix"); err != nil {
			return nil, err
		}
		if msg := validName(prefix); msg != "" {
			return nil, p.errAt(pn, m.at("name_prefix"), "name prefix %s", msg)
		}
	}

	suffix := count > len(list)
	for i := range count {
		spec := list[i%len(list)]
		name := prefix + spec.Name
		if suffix {
			name += "-" + strconv.Itoa(i/len(list))
		}
		if len(name) > maxNameLen {
			return nil, p.errAt(m.node, path, "model name %q is longer than %d bytes", name, maxNameLen)
		}
		if where, dup := names[name]; dup {
			return nil, p.errAt(m.node, path, "expands to model %q, which %s already names (use name_prefix)", name, where)
		}
		names[name] = fmt.Sprintf("%s at line %d", path, m.node.Line)
		md := Model{
			Name:          name,
			Profile:       p.zooProfile(zooName, spec),
			SLO:           spec.SLO,
			StaticMemory:  spec.StaticMemory,
			DynamicMemory: spec.DynamicMemory,
			Rates:         make([]RatePhase, len(base)),
			Arrival:       arr,
		}
		if slo > 0 {
			md.SLO = slo
		} else if scale != 1 {
			d := math.Round(float64(spec.SLO) * scale)
			if !(d >= 1 && d < math.MaxInt64) {
				return nil, p.errAt(scaleNode, m.at("slo_scale"), "%g puts the SLO of %s (%v) out of range", scale, spec.Name, spec.SLO)
			}
			md.SLO = time.Duration(d)
		}
		for j, ph := range base {
			md.Rates[j] = RatePhase{Duration: ph.Duration, Rate: ph.Rate * weights[i]}
		}
		models = append(models, md)
		p.nmodels++
	}
	return models, nil
}

// enumField reads a string field holding one of a scheduler enum's names,
// and reports an unknown name at the field's line.
func enumField[T any](p *parser, v *yaml.Node, key, want string, parse func(string) (T, error)) (T, error) {
	var zero T
	s, n, err := p.str(v, key, want)
	if err != nil {
		return zero, err
	}
	t, err := parse(s)
	if err != nil {
		return zero, p.errAt(n, key, "%v", err)
	}
	return t, nil
}
