package partition

import (
	"math"

	"go.yaml.in/yaml/v3"

	"github.com/symphony-serving/symphony/partition/strictyaml"
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
// "abc" is not a number"), so that a user can fix the file without
// guessing, while callers can still inspect the parts. It is the error of
// every Symphony input file (package strictyaml).
type ModelFileError = strictyaml.Error

// ParseModelFile reads and parses the model file at path.
func ParseModelFile(path string) (*ModelFile, error) {
	data, err := strictyaml.ReadFile(path, MaxModelFileSize, "partition", "a model file")
	if err != nil {
		return nil, err
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
	root, err := strictyaml.Decode(data, name, MaxModelFileSize, "empty model file (want a YAML mapping with at least parts and models)")
	if err != nil {
		return nil, err
	}
	p := &mfParser{Reader: strictyaml.Reader{Source: name, Work: maxModelFileWork}}
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

// mfParser walks one model file's node tree.
type mfParser struct {
	strictyaml.Reader
}

// FormatSize renders a byte count the way model files write it (170MiB,
// 10.5GiB), so that reports read like their input.
func FormatSize(b int64) string { return strictyaml.FormatSize(b) }

var (
	modelFileKeys = []string{"parts", "max_rate_per_part", "gpu_memory", "memory_weight", "models", "current", "max_disruption"}
	mfModelKeys   = []string{"name", "rate", "memory"}
	mfMemoryKeys  = []string{"static", "dynamic"}
)

func (p *mfParser) file(root *yaml.Node) (*ModelFile, error) {
	m, err := p.Mapping(root, "", "a mapping of model file fields (parts, models, ...)", modelFileKeys)
	if err != nil {
		return nil, err
	}
	pr := &Problem{MaxDisruption: -1}
	mf := &ModelFile{Problem: pr}

	v, err := p.Required(m, "parts", " (the number of sub-clusters or scheduler instances)")
	if err != nil {
		return nil, err
	}
	if pr.Parts, err = p.IntIn(v, "parts", 1, MaxModelFileParts); err != nil {
		return nil, err
	}
	if v, ok := m.Lookup("max_rate_per_part"); ok {
		if pr.MaxRatePerPart, err = p.FloatIn(v, "max_rate_per_part", 0, math.MaxFloat64); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("gpu_memory"); ok {
		if pr.GPUMemory, err = p.Size(v, "gpu_memory", math.MaxInt64); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("memory_weight"); ok {
		if pr.MemoryWeight, err = p.FloatIn(v, "memory_weight", 0, math.MaxFloat64); err != nil {
			return nil, err
		}
	}
	if v, ok := m.Lookup("max_disruption"); ok {
		if pr.MaxDisruption, err = p.Size(v, "max_disruption", math.MaxInt64); err != nil {
			return nil, err
		}
	}

	v, err = p.Required(m, "models", " (a list of {name, rate, memory: {static, dynamic}})")
	if err != nil {
		return nil, err
	}
	index := make(map[string]int)
	if pr.Models, err = p.models(v, "models", pr, index); err != nil {
		return nil, err
	}
	if v, ok := m.Lookup("current"); ok {
		if pr.Current, err = p.current(v, "current", pr, index); err != nil {
			return nil, err
		}
	} else if m.Has("max_disruption") {
		mf.Warnings = append(mf.Warnings, "max_disruption has no effect without a current assignment")
	}
	return mf, nil
}

func (p *mfParser) models(n *yaml.Node, path string, pr *Problem, index map[string]int) ([]Model, error) {
	seq, err := p.Seq(n, path, "a list of models")
	if err != nil {
		return nil, err
	}
	if len(seq) == 0 {
		return nil, p.ErrAt(n, path, "no models; a model file lists at least one")
	}
	if len(seq) > MaxModelFileModels {
		return nil, p.ErrAt(n, path, "more than %d models", MaxModelFileModels)
	}
	out := make([]Model, 0, len(seq))
	lines := make(map[string]int, len(seq))
	for i, e := range seq {
		ep := strictyaml.Index(path, i)
		md, nameNode, err := p.model(e, ep, pr)
		if err != nil {
			return nil, err
		}
		if j, dup := index[md.Name]; dup {
			return nil, p.ErrAt(nameNode, ep+".name", "duplicate model name %q (%s[%d] at line %d has it too)", md.Name, path, j, lines[md.Name])
		}
		index[md.Name] = i
		lines[md.Name] = nameNode.Line
		out = append(out, md)
	}
	return out, nil
}

func (p *mfParser) model(n *yaml.Node, path string, pr *Problem) (Model, *yaml.Node, error) {
	var md Model
	m, err := p.Mapping(n, path, "a model mapping {name, rate, memory: {static, dynamic}}", mfModelKeys)
	if err != nil {
		return md, nil, err
	}
	v, err := p.Required(m, "name", "")
	if err != nil {
		return md, nil, err
	}
	name, nameNode, err := p.Name(v, m.At("name"), "model name", maxModelNameLen)
	if err != nil {
		return md, nil, err
	}
	md.Name = name
	v, err = p.Required(m, "rate", " (requests per second)")
	if err != nil {
		return md, nil, err
	}
	if md.Rate, err = p.FloatIn(v, m.At("rate"), 0, maxModelRate); err != nil {
		return md, nil, err
	}
	if pr.MaxRatePerPart > 0 && md.Rate > pr.MaxRatePerPart {
		return md, nil, p.ErrAt(v, m.At("rate"), "%g exceeds max_rate_per_part %g, so no part can take the model", md.Rate, pr.MaxRatePerPart)
	}
	if v, ok := m.Lookup("memory"); ok {
		mm, err := p.Mapping(v, m.At("memory"), "a mapping {static, dynamic}", mfMemoryKeys)
		if err != nil {
			return md, nil, err
		}
		if v, ok := mm.Lookup("static"); ok {
			if md.StaticMemory, err = p.Size(v, mm.At("static"), maxModelMemory); err != nil {
				return md, nil, err
			}
		}
		if v, ok := mm.Lookup("dynamic"); ok {
			if md.DynamicMemory, err = p.Size(v, mm.At("dynamic"), maxModelMemory); err != nil {
				return md, nil, err
			}
		}
		if g := pr.GPUMemory; g > 0 && md.StaticMemory+md.DynamicMemory > g {
			return md, nil, p.ErrAt(mm.Node, mm.Path, "static %s + dynamic %s exceeds gpu_memory %s, so no part can hold the model",
				FormatSize(md.StaticMemory), FormatSize(md.DynamicMemory), FormatSize(g))
		}
	}
	return md, nameNode, nil
}

// current reads the current assignment: model name -> part. Models it
// leaves out are new. Its entries are read in file order (not through
// Mapping, whose keys are unordered) so that the first bad entry is the
// one reported.
func (p *mfParser) current(n *yaml.Node, path string, pr *Problem, index map[string]int) ([]int, error) {
	n, err := p.Resolve(n, path)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, p.ErrAt(n, path, "want a mapping of model name to part, got %s", strictyaml.Describe(n))
	}
	cur := make([]int, len(pr.Models))
	for i := range cur {
		cur[i] = Unassigned
	}
	keyLine := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := p.Resolve(n.Content[i], path)
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
			return nil, p.ErrAt(k, path, "want model names as keys, got %s", strictyaml.Describe(k))
		}
		name := k.Value
		fp := strictyaml.Join(path, name)
		idx, ok := index[name]
		if !ok {
			return nil, p.ErrAt(k, fp, "no model named %q in models", name)
		}
		if prev, ok := keyLine[name]; ok {
			return nil, p.ErrAt(k, fp, "model %q given twice (first at line %d)", name, prev)
		}
		keyLine[name] = k.Line
		if cur[idx], err = p.IntIn(n.Content[i+1], fp, 0, pr.Parts-1); err != nil {
			return nil, err
		}
	}
	return cur, nil
}
