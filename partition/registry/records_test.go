package registry

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleScheduler() Scheduler {
	return Scheduler{Name: "sched-0a", Part: 2, Role: RoleActive, Address: "10.0.0.1:7100", Revision: 42}
}

func sampleBackend() Backend {
	return Backend{Name: "gpu-host-3", GPUs: 8, Address: "10.0.0.3:7200", Models: []string{"ResNet50", "BERT"}}
}

func sampleFrontend() Frontend { return Frontend{Name: "fe-1", DataAddress: "[::1]:7300", Routes: 12} }

func sampleModel() Model {
	return Model{Name: "ResNet50", SLO: 100 * time.Millisecond, StaticMemory: 100 << 20, DynamicMemory: 1 << 20}
}

func sampleAssignment() Assignment {
	return Assignment{Epoch: 7, Parts: 3, Models: map[string]int{"ResNet50": 0, "BERT": 2},
		Keep: map[string]int{"BERT": 1}, Backends: map[string]int{"gpu-0": 0, "gpu-1": FreePool}}
}

func sampleReport() Report {
	return Report{Part: 1, Scheduler: "sched-1a", Start: 1e18, At: 1e18 + 5e9, Ready: []string{"BERT"},
		Models: map[string]Counts{"BERT": {Tasks: 900, Bad: 3}}, Busy: 4 * time.Second, Online: 9 * time.Second, Backends: []string{"gpu-1"}}
}

func sampleEpoch() Epoch {
	return Epoch{Epoch: 4, At: 2e18, Window: 5 * time.Second, Engine: "heuristic", Deterministic: true, BadRate: 0.004,
		IdleFraction: 0.3, GPUsBefore: 8, GPUs: 9, Need: 6.5, PartGPUs: []int{3, 6}, Moves: 1, Rates: map[string]float64{"BERT": 120.5}}
}

func sampleRoutes() Routes {
	return Routes{Epoch: 7, Models: map[string]int{"ResNet50": 0, "BERT": 1}, Schedulers: map[int]string{0: "10.0.0.1:7100", 1: "10.0.0.2:7100"}}
}

func roundTrip[T record](t *testing.T, v T) {
	t.Helper()
	b, err := Encode(v)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", v, err)
	}
	got, err := Decode[T](b)
	if err != nil {
		t.Fatalf("Decode(%s): %v", b, err)
	}
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("round trip changed %+v into %+v", v, got)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	roundTrip(t, sampleScheduler())
	roundTrip(t, Scheduler{Name: "s", Part: 0, Role: RoleStandby, Address: "h:1"})
	roundTrip(t, sampleBackend())
	roundTrip(t, sampleFrontend())
	roundTrip(t, sampleModel())
	roundTrip(t, sampleAssignment())
	roundTrip(t, sampleRoutes())
	roundTrip(t, sampleReport())
	roundTrip(t, sampleEpoch())
}

func TestAssignmentHolds(t *testing.T) {
	a := sampleAssignment()
	for _, c := range []struct {
		part  int
		model string
		want  bool
	}{{2, "BERT", true}, {1, "BERT", true}, {0, "BERT", false}, {0, "ResNet50", true}, {1, "ResNet50", false}, {0, "nope", false}} {
		if got := a.Holds(c.part, c.model); got != c.want {
			t.Errorf("Holds(%d, %s) = %v, want %v", c.part, c.model, got, c.want)
		}
	}
}

func TestRoutesRoute(t *testing.T) {
	r := sampleRoutes()
	if p, a, ok := r.Route("BERT"); !ok || p != 1 || a != "10.0.0.2:7100" {
		t.Fatalf("Route(BERT) = %d, %q, %v", p, a, ok)
	}
	delete(r.Schedulers, 1)
	if _, _, ok := r.Route("BERT"); ok {
		t.Fatal("a part with no active scheduler has a route")
	}
	if _, _, ok := r.Route("nope"); ok {
		t.Fatal("an unknown model has a route")
	}
}

// TestDecodeRejects names, for each bad value, the words its error must
// carry.
func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name, kind, in, want string
	}{
		{"unknown field", "scheduler", `{"name":"s","part":0,"role":"standby","address":"h:1","revision":0,"extra":1}`, `unknown field "extra"`},
		{"field in another case", "scheduler", `{"Name":"s","part":0,"role":"standby","address":"h:1","revision":0}`, `unknown field "Name"`},
		{"repeated field", "frontend", `{"name":"a","name":"b","data_address":"h:1"}`, `"name" repeated`},
		{"repeated map key", "assignment", `{"epoch":1,"parts":2,"models":{"a":0,"a":1}}`, `"a" repeated`},
		{"trailing data", "frontend", `{"name":"a","data_address":"h:1"} {}`, "data after the record"},
		{"not an object", "model", `[1,2]`, "want a JSON object"},
		{"null", "model", `null`, "want a JSON object"},
		{"empty", "model", ``, "EOF"},
		{"bad role", "scheduler", `{"name":"s","part":0,"role":"leader","address":"h:1","revision":0}`, `unknown role "leader"`},
		{"active without revision", "scheduler", `{"name":"s","part":0,"role":"active","address":"h:1","revision":0}`, "election's revision"},
		{"negative part", "scheduler", `{"name":"s","part":-1,"role":"standby","address":"h:1","revision":0}`, "part -1"},
		{"no port", "backend", `{"name":"b","gpus":1,"address":"h","models":[]}`, "address"},
		{"zero gpus", "backend", `{"name":"b","gpus":0,"address":"h:1","models":[]}`, "gpus: 0"},
		{"model twice", "backend", `{"name":"b","gpus":1,"address":"h:1","models":["m","m"]}`, "listed twice"},
		{"slash in name", "backend", `{"name":"a/b","gpus":1,"address":"h:1","models":null}`, "'/'"},
		{"missing name", "frontend", `{"data_address":"h:1"}`, "name: empty"},
		{"zero slo", "model", `{"name":"m","slo_ns":0,"static_memory":0,"dynamic_memory":0}`, "slo_ns"},
		{"fractional slo", "model", `{"name":"m","slo_ns":1.5,"static_memory":0,"dynamic_memory":0}`, "slo_ns"},
		{"negative memory", "model", `{"name":"m","slo_ns":1000,"static_memory":-1,"dynamic_memory":0}`, "negative"},
		{"part out of range", "assignment", `{"epoch":1,"parts":2,"models":{"a":2}}`, "part 2 is not in [0, 2)"},
		{"no parts", "assignment", `{"epoch":1,"parts":0,"models":{}}`, "parts: 0"},
		{"bad part key", "routes", `{"epoch":1,"models":{},"schedulers":{"x":"h:1"}}`, "schedulers"},
		{"bad scheduler address", "routes", `{"epoch":1,"models":{"a":0},"schedulers":{"0":"nowhere"}}`, "schedulers[0]"},
		{"invalid utf-8", "frontend", "{\"name\":\"\xff\",\"data_address\":\"h:1\"}", "UTF-8"},
		{"keep of an unassigned model", "assignment", `{"epoch":1,"parts":2,"models":{"a":0},"keep":{"b":1},"backends":null}`, `keep["b"]: not an assigned model`},
		{"keep at its own part", "assignment", `{"epoch":1,"parts":2,"models":{"a":0},"keep":{"a":0},"backends":null}`, "own part"},
		{"backend below the free pool", "assignment", `{"epoch":1,"parts":2,"models":{},"keep":null,"backends":{"g":-2}}`, `backends["g"]: part -2`},
		{"negative routes revision", "frontend", `{"name":"a","data_address":"h:1","routes":-1}`, "routes: revision -1"},
		{"report before its start", "report", `{"part":0,"scheduler":"s","start_ns":5,"at_ns":4,"ready":null,"models":null,"busy_ns":0,"online_ns":0,"backends":null}`, "before start_ns"},
		{"report ready twice", "report", `{"part":0,"scheduler":"s","start_ns":0,"at_ns":0,"ready":["m","m"],"models":null,"busy_ns":0,"online_ns":0,"backends":null}`, "listed twice"},
		{"report negative busy", "report", `{"part":0,"scheduler":"s","start_ns":0,"at_ns":0,"ready":null,"models":null,"busy_ns":-1,"online_ns":0,"backends":null}`, "negative"},
		{"epoch negative rate", "epoch", `{"epoch":1,"rates":{"m":-1}}`, `rates["m"]`},
		{"epoch negative part gpus", "epoch", `{"epoch":1,"part_gpus":[1,-1]}`, "part_gpus[1]"},
		{"too deep", "routes", `{"models":{"a":[[[[[[[[[[1]]]]]]]]]]}}`, "nested deeper"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := decodeKind(c.kind, []byte(c.in))
			if err == nil {
				t.Fatalf("decoded %s", c.in)
			}
			var de *DecodeError
			if !errors.As(err, &de) || de.Kind != c.kind {
				t.Fatalf("error %v is not a *DecodeError of kind %s", err, c.kind)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
	big := `{"name":"` + strings.Repeat("a", MaxValueBytes) + `","data_address":"h:1"}`
	if err := decodeKind("frontend", []byte(big)); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Fatalf("a value over MaxValueBytes: %v", err)
	}
}

func TestEncodeValidates(t *testing.T) {
	if _, err := Encode(Backend{Name: "b", GPUs: 1, Address: "h:1", Models: []string{""}}); err == nil {
		t.Fatal("encoded a backend with an empty model name")
	}
	if _, err := Encode(Scheduler{Name: "s", Role: Role(9), Address: "h:1"}); err == nil {
		t.Fatal("encoded an unknown role")
	}
}

func decodeKind(kind string, b []byte) error {
	var err error
	switch kind {
	case "scheduler":
		_, err = DecodeScheduler(b)
	case "backend":
		_, err = DecodeBackend(b)
	case "frontend":
		_, err = DecodeFrontend(b)
	case "model":
		_, err = DecodeModel(b)
	case "assignment":
		_, err = DecodeAssignment(b)
	case "routes":
		_, err = DecodeRoutes(b)
	case "report":
		_, err = DecodeReport(b)
	case "epoch":
		_, err = DecodeEpoch(b)
	default:
		panic(kind)
	}
	return err
}
