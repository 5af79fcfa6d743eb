package main

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A miniature of swagger.json: a kind with an IntOrString, a Quantity
// map, a required field, a nested object and a recursive definition.
const doc = `{"definitions": {
  "io.k8s.api.apps.v1.Thing": {
    "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Thing"}],
    "description": "dropped", "type": "object", "required": ["spec"],
    "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.ThingSpec"}
    }
  },
  "io.k8s.api.apps.v1.ThingSpec": {
    "type": "object",
    "properties": {
      "replicas": {"type": "integer", "format": "int32"},
      "port": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
      "limits": {"type": "object", "additionalProperties": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}},
      "tree": {"$ref": "#/definitions/io.k8s.api.apps.v1.Tree"}
    }
  },
  "io.k8s.api.apps.v1.Tree": {"type": "object", "properties": {"child": {"$ref": "#/definitions/io.k8s.api.apps.v1.Tree"}}},
  "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
  "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
  "io.k8s.api.core.v1.Plain": {
    "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "Plain"}],
    "type": "object", "properties": {"kind": {"type": "string"}}
  }
}}`

func TestConvert(t *testing.T) {
	files, err := convert([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files["thing-apps-v1.json"] == nil || files["plain-v1.json"] == nil {
		t.Fatalf("files %v: want thing-apps-v1.json and plain-v1.json", keys(files))
	}
	var got any
	if err := json.Unmarshal(files["thing-apps-v1.json"], &got); err != nil {
		t.Fatal(err)
	}
	want := `{
	  "type": "object", "required": ["spec"], "additionalProperties": false,
	  "properties": {
	    "apiVersion": {"type": "string", "enum": ["apps/v1"]},
	    "kind": {"type": "string", "enum": ["Thing"]},
	    "spec": {
	      "type": "object", "additionalProperties": false,
	      "properties": {
	        "replicas": {"type": ["integer", "null"]},
	        "port": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
	        "limits": {"type": ["object", "null"], "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}]}},
	        "tree": {"type": ["object", "null"], "additionalProperties": false,
	          "properties": {"child": {}}}
	      }
	    }
	  }
	}`
	var w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("thing-apps-v1.json:\n%s\nwant:\n%s", files["thing-apps-v1.json"], want)
	}
}

func TestConvertRefusesBrokenRefs(t *testing.T) {
	_, err := convert([]byte(`{"definitions": {"a.B": {
	  "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "B"}],
	  "properties": {"c": {"$ref": "#/definitions/a.Missing"}}}}}`))
	if err == nil {
		t.Fatal("a $ref to a missing definition converted")
	}
}

func TestFileName(t *testing.T) {
	for _, c := range []struct{ kind, apiVersion, want string }{
		{"Service", "v1", "service-v1.json"},
		{"Deployment", "apps/v1", "deployment-apps-v1.json"},
		{"HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscaler-autoscaling-v2.json"},
		{"ClusterRole", "rbac.authorization.k8s.io/v1", "clusterrole-rbac-v1.json"},
	} {
		if got := fileName(c.kind, c.apiVersion); got != c.want {
			t.Errorf("fileName(%s, %s) = %s, want %s", c.kind, c.apiVersion, got, c.want)
		}
	}
}

func keys(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	return k
}
