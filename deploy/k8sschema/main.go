// Command k8sschema turns Kubernetes' OpenAPI v2 document
// (api/openapi-spec/swagger.json of the k8s.io/kubernetes module, which
// the Go module proxy serves) into the JSON schemas kubeconform validates
// manifests against: one standalone, strict schema per kind, named as
// kubeconform looks them up (deployment-apps-v1.json, service-v1.json).
// They are what github.com/yannh/kubernetes-json-schema publishes, made
// here because `make deploy-check` must run where GitHub is not reachable.
//
//	k8sschema -in swagger.json -out DIR
//
// The conversion is openapi2jsonschema's "standalone strict" one:
//   - every $ref is inlined (a kind's file stands alone); a reference back
//     to a definition being inlined (JSONSchemaProps is recursive) accepts
//     anything;
//   - every object with properties refuses others (additionalProperties:
//     false), so a misspelt or misplaced field fails;
//   - an optional field may be null, as the API server accepts;
//   - IntOrString takes a string or an integer, Quantity a string or a
//     number (cpu: 2, memory: 1Gi);
//   - apiVersion and kind are pinned to the kind's own;
//   - descriptions, formats (int32, byte: not JSON Schema formats) and
//     x-kubernetes-* extensions are dropped.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	in := flag.String("in", "", "Kubernetes' OpenAPI v2 document (swagger.json)")
	out := flag.String("out", "", "folder to write the schemas into (created)")
	flag.Parse()
	if *in == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: k8sschema -in swagger.json -out DIR")
		os.Exit(2)
	}
	n, err := run(*in, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
	fmt.Printf("k8sschema: %d schemas in %s\n", n, *out)
}

// run converts the document at in into schema files in out and returns
// how many it wrote.
func run(in, out string) (int, error) {
	data, err := os.ReadFile(in)
	if err != nil {
		return 0, err
	}
	files, err := convert(data)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", in, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return 0, err
	}
	for name, schema := range files {
		if err := os.WriteFile(filepath.Join(out, name), schema, 0o644); err != nil {
			return 0, err
		}
	}
	return len(files), nil
}

// object is a decoded JSON object.
type object = map[string]any

// convert returns the schema files of the OpenAPI v2 document data, by
// file name.
func convert(data []byte) (map[string][]byte, error) {
	var doc struct {
		Definitions map[string]object `json:"definitions"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if len(doc.Definitions) == 0 {
		return nil, errors.New("no definitions: not an OpenAPI v2 document")
	}
	c := &converter{defs: doc.Definitions, done: map[string]object{}, busy: map[string]bool{}}
	names := make([]string, 0, len(c.defs))
	for name := range c.defs {
		names = append(names, name)
	}
	sort.Strings(names) // a kind defined twice gets the same file every run
	files := map[string][]byte{}
	for _, name := range names {
		gvks, _ := c.defs[name]["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			gvk, _ := g.(object)
			group, _ := gvk["group"].(string)
			version, _ := gvk["version"].(string)
			kind, _ := gvk["kind"].(string)
			if version == "" || kind == "" {
				return nil, fmt.Errorf("%s: a group-version-kind without a version or kind", name)
			}
			schema, err := c.ref(name)
			if err != nil {
				return nil, err
			}
			apiVersion := version
			if group != "" {
				apiVersion = group + "/" + version
			}
			schema = pin(schema, apiVersion, kind)
			text, err := json.Marshal(schema)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			files[fileName(kind, apiVersion)] = text
		}
	}
	if len(files) == 0 {
		return nil, errors.New("no definition names a group-version-kind")
	}
	return files, nil
}

// fileName is the file kubeconform reads for a kind of an API version:
// its {{ .ResourceKind }}{{ .KindSuffix }}.json (pkg/registry's
// schemaPath): the kind and the group's first label and the version, in
// lower case.
func fileName(kind, apiVersion string) string {
	group, version, grouped := strings.Cut(apiVersion, "/")
	suffix := "-" + strings.ToLower(strings.Split(group, ".")[0])
	if grouped {
		suffix += "-" + strings.ToLower(version)
	}
	return strings.ToLower(kind) + suffix + ".json"
}

// pin returns schema with its apiVersion and kind properties limited to
// apiVersion and kind.
func pin(schema object, apiVersion, kind string) object {
	props, ok := schema["properties"].(object)
	if !ok {
		return schema
	}
	p := make(object, len(props))
	for k, v := range props {
		p[k] = v
	}
	p["apiVersion"] = object{"type": "string", "enum": []any{apiVersion}}
	p["kind"] = object{"type": "string", "enum": []any{kind}}
	s := make(object, len(schema))
	for k, v := range schema {
		s[k] = v
	}
	s["properties"] = p
	return s
}

// converter inlines and rewrites definitions, each once.
type converter struct {
	defs map[string]object
	done map[string]object // converted definitions
	busy map[string]bool   // definitions being converted: a ref to one is a cycle
}

const refPrefix = "#/definitions/"

// The definitions whose JSON forms are not what their OpenAPI types say.
var special = map[string]object{
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"oneOf": []any{object{"type": "string"}, object{"type": "integer"}}},
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   {"oneOf": []any{object{"type": "string"}, object{"type": "number"}}},
}

// ref returns the definition name, converted.
func (c *converter) ref(name string) (object, error) {
	if s, ok := special[name]; ok {
		return s, nil
	}
	if s, ok := c.done[name]; ok {
		return s, nil
	}
	if c.busy[name] {
		return object{}, nil // a cycle: anything goes below here
	}
	def, ok := c.defs[name]
	if !ok {
		return nil, fmt.Errorf("$ref to %s: no such definition", name)
	}
	c.busy[name] = true
	s, err := c.schema(def)
	delete(c.busy, name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c.done[name] = s
	return s, nil
}

// schema converts one schema object.
func (c *converter) schema(in object) (object, error) {
	if r, ok := in["$ref"].(string); ok {
		name, found := strings.CutPrefix(r, refPrefix)
		if !found {
			return nil, fmt.Errorf("$ref %q: not a local definition", r)
		}
		return c.ref(name)
	}
	if in["format"] == "int-or-string" {
		return special["io.k8s.apimachinery.pkg.util.intstr.IntOrString"], nil
	}
	out := object{}
	for k, v := range in {
		switch {
		case k == "description" || k == "format" || strings.HasPrefix(k, "x-"):
		case k == "properties":
			props, err := c.properties(v, in["required"])
			if err != nil {
				return nil, err
			}
			out[k] = props
		case k == "items" || k == "additionalProperties":
			sub, ok := v.(object)
			if !ok {
				out[k] = v // additionalProperties: true or false
				continue
			}
			s, err := c.schema(sub)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = s
		default:
			out[k] = v
		}
	}
	if _, ok := out["properties"]; ok {
		if _, set := out["additionalProperties"]; !set {
			out["additionalProperties"] = false
		}
	}
	return out, nil
}

// properties converts a properties object; fields not in required may be
// null.
func (c *converter) properties(v, required any) (object, error) {
	props, ok := v.(object)
	if !ok {
		return nil, errors.New("properties: not an object")
	}
	req := map[string]bool{}
	if list, ok := required.([]any); ok {
		for _, r := range list {
			if s, ok := r.(string); ok {
				req[s] = true
			}
		}
	}
	out := make(object, len(props))
	for name, p := range props {
		sub, ok := p.(object)
		if !ok {
			return nil, fmt.Errorf("property %s: not an object", name)
		}
		s, err := c.schema(sub)
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", name, err)
		}
		if t, ok := s["type"].(string); ok && !req[name] {
			n := make(object, len(s)) // s may be a shared definition: copy it
			for k, v := range s {
				n[k] = v
			}
			n["type"] = []any{t, "null"}
			s = n
		}
		out[name] = s
	}
	return out, nil
}
