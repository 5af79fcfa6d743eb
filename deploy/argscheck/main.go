// Command argscheck checks the Symphony containers of rendered Kubernetes
// manifests against the symphony binary itself, which kubeconform cannot:
// each container's args, its SYMPHONY_* environment and the config file
// its ConfigMap mounts must be flags and values the process accepts. It
// runs each container's command line with --print-config, which resolves
// the configuration as the process would and exits before starting
// anything; a flag that does not exist, a bad value or an unknown key in
// the config file fails it, as it would fail the pod's start.
//
//	argscheck -symphony BIN MANIFEST...
//
// A container is Symphony's when its image's name is symphony. $(VAR) in
// args takes the container's env value, or a stand-in for a downward-API
// field (status.podIP is 10.0.0.1).
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

func main() {
	bin := flag.String("symphony", "", "the symphony binary to check the args against")
	flag.Parse()
	if *bin == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: argscheck -symphony BIN MANIFEST...")
		os.Exit(2)
	}
	var docs []obj
	for _, f := range flag.Args() {
		d, err := readDocs(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, "argscheck:", err)
			os.Exit(1)
		}
		docs = append(docs, d...)
	}
	checked, failed := check(*bin, docs)
	fmt.Printf("argscheck: %d symphony containers, %d failed\n", checked, failed)
	if failed > 0 || checked == 0 {
		os.Exit(1)
	}
}

type obj = map[string]any

// readDocs decodes every YAML document of a file.
func readDocs(file string) ([]obj, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var docs []obj
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d obj
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			return docs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks m along keys; nil where a key is missing.
func get(m any, keys ...string) any {
	for _, k := range keys {
		mm, ok := m.(obj)
		if !ok {
			return nil
		}
		m = mm[k]
	}
	return m
}

func str(v any) string { s, _ := v.(string); return s }

func list(v any) []any { l, _ := v.([]any); return l }

// check runs every Symphony container of docs and returns how many it
// ran and how many failed.
func check(bin string, docs []obj) (checked, failed int) {
	configMaps := map[string]obj{} // namespace/name: data
	for _, d := range docs {
		if str(d["kind"]) == "ConfigMap" {
			data, _ := d["data"].(obj)
			configMaps[str(get(d, "metadata", "namespace"))+"/"+str(get(d, "metadata", "name"))] = data
		}
	}
	for _, d := range docs {
		spec, _ := get(d, "spec", "template", "spec").(obj) // Deployment, StatefulSet, DaemonSet, Job
		if spec == nil {
			continue
		}
		ns := str(get(d, "metadata", "namespace"))
		for _, ci := range list(spec["containers"]) {
			c, _ := ci.(obj)
			image := str(get(c, "image"))
			if name, _, _ := strings.Cut(path.Base(image), ":"); name != "symphony" {
				continue
			}
			checked++
			where := fmt.Sprintf("%s %s, container %s", d["kind"], get(d, "metadata", "name"), get(c, "name"))
			if out, err := run(bin, c, spec, ns, configMaps); err != nil {
				failed++
				out, _, _ = bytes.Cut(out, []byte("Usage:")) // the error, not the flags' list
				fmt.Printf("FAIL %s: %v\n%s", where, err, out)
			} else {
				fmt.Printf("ok   %s\n", where)
			}
		}
	}
	return checked, failed
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// stand-ins for the downward API's fields.
var fieldValues = map[string]string{"status.podIP": "10.0.0.1", "metadata.name": "pod-0", "metadata.namespace": "default", "spec.nodeName": "node-0"}

// run runs the container's command line with --print-config, with its
// ConfigMap volumes written to a temporary folder.
func run(bin string, c, spec obj, ns string, configMaps map[string]obj) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "argscheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	mounts := map[string]string{} // mountPath: its stand-in here
	for _, m := range list(c["volumeMounts"]) {
		for _, v := range list(spec["volumes"]) {
			cm := str(get(v, "configMap", "name"))
			if cm == "" || str(get(v, "name")) != str(get(m, "name")) {
				continue
			}
			data, ok := configMaps[ns+"/"+cm]
			if !ok {
				return nil, fmt.Errorf("ConfigMap %s/%s: not in the manifests", ns, cm)
			}
			dir := filepath.Join(tmp, fmt.Sprint(len(mounts)))
			if err := os.Mkdir(dir, 0o755); err != nil {
				return nil, err
			}
			for k, val := range data {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(str(val)), 0o644); err != nil {
					return nil, err
				}
			}
			mounts[strings.TrimSuffix(str(get(m, "mountPath")), "/")+"/"] = dir + "/"
		}
	}
	// mounted rewrites a path under a ConfigMap's mountPath, alone or as
	// a --flag=path's value, to the stand-in.
	mounted := func(s string) string {
		for mp, dir := range mounts {
			if strings.HasPrefix(s, mp) {
				return dir + s[len(mp):]
			}
			s = strings.Replace(s, "="+mp, "="+dir, 1)
		}
		return s
	}
	env := []string{"PATH=" + os.Getenv("PATH")}
	vars := map[string]string{}
	for _, e := range list(c["env"]) {
		name, value := str(get(e, "name")), str(get(e, "value"))
		if f := str(get(e, "valueFrom", "fieldRef", "fieldPath")); f != "" {
			value = fieldValues[f]
		}
		vars[name] = value
		env = append(env, name+"="+mounted(value))
	}
	cmdline := list(c["args"])
	if command := list(c["command"]); len(command) > 0 { // command[0] replaces the image's /symphony
		cmdline = append(command[1:len(command):len(command)], cmdline...)
	}
	var args []string
	for _, a := range cmdline {
		s := varRef.ReplaceAllStringFunc(str(a), func(ref string) string {
			if v, ok := vars[ref[2:len(ref)-1]]; ok {
				return v
			}
			return ref // as Kubernetes leaves an unknown one
		})
		args = append(args, mounted(s))
	}
	cmd := exec.Command(bin, append(args, "--print-config")...)
	cmd.Env = env
	return cmd.CombinedOutput()
}
