package daemon

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment variable that sets a flag:
// SYMPHONY_METRICS_ADDR sets --metrics-addr.
const EnvPrefix = "SYMPHONY_"

// ConfigEnv names the config file when --config is not given.
const ConfigEnv = EnvPrefix + "CONFIG"

// maxConfigBytes bounds a config file: it holds flag values, never data.
const maxConfigBytes = 1 << 20

// Source says where a flag's effective value came from.
type Source string

// The sources of a flag's value, in the order of precedence.
const (
	FromFlag    Source = "flag"
	FromEnv     Source = "environment"
	FromFile    Source = "file"
	FromDefault Source = "default"
)

// EnvName is the environment variable that sets the flag name:
// SYMPHONY_ and the name in upper case, dashes as underscores.
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Lookup reads an environment variable, as os.LookupEnv does; tests pass
// their own instead of changing the process's environment.
type Lookup func(key string) (string, bool)

// notConfigurable are the flags that only the command line sets: they say
// what to do with the configuration, not what it is.
var notConfigurable = map[string]bool{"config": true, "print-config": true, "version": true}

// Resolved is a command's configuration after Apply: where each flag's
// value came from.
type Resolved struct {
	fs      *flag.FlagSet
	sources map[string]Source
	file    string
}

// Source is where the flag name's value came from.
func (r *Resolved) Source(name string) Source {
	if s, ok := r.sources[name]; ok {
		return s
	}
	return FromDefault
}

// File is the config file read, or "" for none.
func (r *Resolved) File() string { return r.file }

// Apply fills in the flags of fs that the command line left unset: from
// the environment (SYMPHONY_<NAME>) first, then from the config file
// (path, "" for none). Precedence is therefore flag > environment > file >
// the flag's default. fs must already be parsed.
//
// The file is YAML: a mapping of flag names to values, whose top-level
// keys are the command's flags (fs.Name()), or a section named after a
// command (scheduler:, backend:, frontend:, controller:) holding a mapping
// of its own.
// One file can thus configure every process of a deployment: each process
// reads the top level and its own section (which wins over the top level),
// and ignores the other sections. sections lists the section names every
// process accepts, so that a typo in one is not silently skipped. A key
// that is not one of this command's flags is an error naming it, as is a
// value the flag refuses; a list sets a repeatable flag once per element.
func Apply(fs *flag.FlagSet, path string, env Lookup, sections []string) (*Resolved, error) {
	r := &Resolved{fs: fs, sources: map[string]Source{}, file: path}
	fs.Visit(func(f *flag.Flag) { r.sources[f.Name] = FromFlag })
	var file map[string][]string
	if path != "" {
		data, err := readConfig(path)
		if err != nil {
			return nil, err
		}
		if file, err = parseConfig(data, fs, sections); err != nil {
			return nil, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if r.sources[f.Name] == FromFlag || notConfigurable[f.Name] {
			return
		}
		if v, ok := env(EnvName(f.Name)); ok {
			if err := fs.Set(f.Name, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q (for --%s): %w", EnvName(f.Name), v, f.Name, err))
			}
			r.sources[f.Name] = FromEnv
			return
		}
		if vs, ok := file[f.Name]; ok {
			for _, v := range vs {
				if err := fs.Set(f.Name, v); err != nil {
					errs = append(errs, fmt.Errorf("config file %s: %s: %q: %w", path, f.Name, v, err))
				}
			}
			r.sources[f.Name] = FromFile
		}
	})
	return r, errors.Join(errs...)
}

// readConfig reads a config file, bounded.
func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("config file %s: larger than %d bytes: a config file holds flag values", path, maxConfigBytes)
	}
	return data, nil
}

// parseConfig reads a config file's flag values for the command fs: the
// top level, then its own section over it. Each value is a list of the
// strings to give fs.Set.
func parseConfig(data []byte, fs *flag.FlagSet, sections []string) (map[string][]string, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file sets nothing
		}
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("want one YAML document")
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return nil, nil
	}
	isSection := map[string]bool{}
	for _, s := range sections {
		isSection[s] = true
	}
	out := map[string][]string{}
	var own *yaml.Node
	err := eachKey(top, "the top level", func(key string, val *yaml.Node) error {
		if isSection[key] {
			if val.Kind != yaml.MappingNode && !(val.Kind == yaml.ScalarNode && val.Tag == "!!null") {
				return fmt.Errorf("line %d: section %s: want a mapping of flag names to values", val.Line, key)
			}
			if key == fs.Name() {
				own = val
			}
			return nil
		}
		return setKey(out, fs, key, val, "")
	})
	if err != nil {
		return nil, err
	}
	if own != nil && own.Kind == yaml.MappingNode {
		err := eachKey(own, "section "+fs.Name(), func(key string, val *yaml.Node) error {
			return setKey(out, fs, key, val, fs.Name()+".")
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// eachKey calls f for each key of the mapping m, refusing anything else
// and duplicate keys.
func eachKey(m *yaml.Node, where string, f func(key string, val *yaml.Node) error) error {
	if m.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a mapping of flag names to values", m.Line, where)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: a key must be a flag name", k.Line, where)
		}
		if seen[k.Value] {
			return fmt.Errorf("line %d: %s: %s given twice", k.Line, where, k.Value)
		}
		seen[k.Value] = true
		if err := f(k.Value, v); err != nil {
			return err
		}
	}
	return nil
}

// setKey records the value of the flag key (prefix names its section in
// errors).
func setKey(out map[string][]string, fs *flag.FlagSet, key string, val *yaml.Node, prefix string) error {
	if notConfigurable[key] {
		return fmt.Errorf("line %d: %s%s: only the command line sets it", val.Line, prefix, key)
	}
	if fs.Lookup(key) == nil {
		return fmt.Errorf("line %d: %s%s is not a flag of %s (see %s -h; a setting of another process goes under its section)",
			val.Line, prefix, key, fs.Name(), fs.Name())
	}
	switch val.Kind {
	case yaml.ScalarNode:
		out[key] = []string{val.Value}
	case yaml.SequenceNode:
		vs := make([]string, 0, len(val.Content))
		for _, e := range val.Content {
			if e.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: %s%s: a list of plain values only", e.Line, prefix, key)
			}
			vs = append(vs, e.Value)
		}
		out[key] = vs
	default:
		return fmt.Errorf("line %d: %s%s: want a value or a list of values", val.Line, prefix, key)
	}
	return nil
}

// WriteEffective writes the command's effective configuration as a config
// file that Apply reads back: every configurable flag with its value, and
// where the value came from as a comment. A flag's Value must print what
// its Set parses (a flag.Func prints nothing: declare a Value instead), and
// a repeatable one is a Repeated, printed as a list.
func (r *Resolved) WriteEffective(w io.Writer) error {
	var names []string
	r.fs.VisitAll(func(f *flag.Flag) {
		if !notConfigurable[f.Name] {
			names = append(names, f.Name)
		}
	})
	sort.Strings(names)
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, n := range names {
		f := r.fs.Lookup(n)
		comment := string(r.Source(n))
		if s := r.Source(n); s == FromEnv {
			comment += " " + EnvName(n)
		}
		val := &yaml.Node{Kind: yaml.ScalarNode, Value: f.Value.String(), Style: scalarStyle(f.Value.String()), LineComment: comment}
		if rep, ok := f.Value.(Repeated); ok {
			val = &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle, LineComment: comment}
			for _, v := range rep.Values() {
				val.Content = append(val.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: v, Style: scalarStyle(v)})
			}
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: n}, val)
	}
	sec := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Value: r.fs.Name(), HeadComment: fmt.Sprintf("symphony %s: the effective configuration (precedence: flag > %s* environment > --config file > default)", r.fs.Name(), EnvPrefix)},
		m,
	}}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{sec}}); err != nil {
		return err
	}
	return enc.Close()
}

// scalarStyle quotes a value that YAML would otherwise read as something
// other than the string written (empty, a number that must stay text, ...),
// so that the printed file reads back as printed.
func scalarStyle(v string) yaml.Style {
	if v == "" {
		return yaml.DoubleQuotedStyle
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return 0
	}
	if v == "true" || v == "false" {
		return 0
	}
	var probe any
	if yaml.Unmarshal([]byte(v), &probe) != nil {
		return yaml.DoubleQuotedStyle
	}
	if s, ok := probe.(string); !ok || s != v {
		return yaml.DoubleQuotedStyle
	}
	return 0
}

// Repeated is a flag.Value of a flag given once per value (--load-model a
// --load-model b). --print-config writes it as a YAML list, which a config
// file gives back as one Set per element.
type Repeated interface {
	flag.Value
	Values() []string
}

// StringList is a repeatable string flag: each use appends one value.
type StringList []string

// String joins the values, for flag's help text.
func (l *StringList) String() string { return strings.Join(*l, ",") }

// Set appends v.
func (l *StringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// Values is the values given, in order (Repeated).
func (l *StringList) Values() []string { return *l }
