package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits on what a record may hold. A value over MaxValueBytes would not
// fit etcd's default request size (1.5 MiB) anyway.
const (
	MaxValueBytes = 1 << 20
	MaxNameBytes  = 253
	MaxParts      = 1 << 16
	MaxGPUs       = 1 << 12
	MaxSLO        = time.Hour
)

// Role is a scheduler's role in its part: one active scheduler plans
// batches, standbys wait to take over.
type Role uint8

const (
	// RoleStandby is the zero Role, so that a record without a role is
	// never read as active.
	RoleStandby Role = iota
	RoleActive
)

// String returns "standby" or "active".
func (r Role) String() string {
	switch r {
	case RoleStandby:
		return "standby"
	case RoleActive:
		return "active"
	}
	return "Role(" + strconv.Itoa(int(r)) + ")"
}

// ParseRole reads "standby" or "active".
func ParseRole(s string) (Role, error) {
	switch s {
	case "standby":
		return RoleStandby, nil
	case "active":
		return RoleActive, nil
	}
	return 0, fmt.Errorf("unknown role %q (want active or standby)", s)
}

// MarshalText writes the role's name.
func (r Role) MarshalText() ([]byte, error) {
	if r > RoleActive {
		return nil, fmt.Errorf("unknown role %d", r)
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads a role's name; anything else is an error.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Scheduler is a scheduler process of one part, registered under a lease.
type Scheduler struct {
	// Name identifies the process within its part (its key's last segment).
	Name string `json:"name"`
	// Part is the part it serves.
	Part int `json:"part"`
	// Role is active or standby.
	Role Role `json:"role"`
	// Address is where frontends and backends reach it (host:port).
	Address string `json:"address"`
	// Revision is the etcd revision of the election that made it active:
	// its term, which grows with every takeover and fences a deposed
	// scheduler's writes. It is 0 for a standby.
	Revision int64 `json:"revision"`
}

// Validate reports the first thing wrong with s.
func (s Scheduler) Validate() error {
	if err := checkName("name", s.Name); err != nil {
		return err
	}
	if err := checkPart("part", s.Part); err != nil {
		return err
	}
	if s.Role > RoleActive {
		return fmt.Errorf("role: unknown role %d", s.Role)
	}
	if err := checkAddress("address", s.Address); err != nil {
		return err
	}
	switch {
	case s.Revision < 0:
		return fmt.Errorf("revision: %d is negative", s.Revision)
	case s.Role == RoleActive && s.Revision == 0:
		return errors.New("revision: an active scheduler needs its election's revision")
	case s.Role == RoleStandby && s.Revision != 0:
		return fmt.Errorf("revision: a standby has none (got %d)", s.Revision)
	}
	return nil
}

// Backend is a GPU agent process, registered under a lease.
type Backend struct {
	Name string `json:"name"`
	// GPUs is how many GPUs it runs batches on.
	GPUs int `json:"gpus"`
	// Address is its control address (host:port).
	Address string `json:"address"`
	// Models are the models it has loaded, each once.
	Models []string `json:"models"`
}

// Validate reports the first thing wrong with b.
func (b Backend) Validate() error {
	if err := checkName("name", b.Name); err != nil {
		return err
	}
	if b.GPUs < 1 || b.GPUs > MaxGPUs {
		return fmt.Errorf("gpus: %d is not in [1, %d]", b.GPUs, MaxGPUs)
	}
	if err := checkAddress("address", b.Address); err != nil {
		return err
	}
	seen := make(map[string]bool, len(b.Models))
	for i, m := range b.Models {
		if err := checkName("models["+strconv.Itoa(i)+"]", m); err != nil {
			return err
		}
		if seen[m] {
			return fmt.Errorf("models[%d]: %q is listed twice", i, m)
		}
		seen[m] = true
	}
	return nil
}

// Frontend is a frontend process, registered under a lease.
type Frontend struct {
	Name string `json:"name"`
	// DataAddress is where backends pull its requests' inputs (host:port).
	DataAddress string `json:"data_address"`
}

// Validate reports the first thing wrong with f.
func (f Frontend) Validate() error {
	if err := checkName("name", f.Name); err != nil {
		return err
	}
	return checkAddress("data_address", f.DataAddress)
}

// Model is a served model: what placement and sizing need of it.
type Model struct {
	Name string `json:"name"`
	// SLO is its latency objective (JSON: nanoseconds).
	SLO time.Duration `json:"slo_ns"`
	// StaticMemory and DynamicMemory are bytes, as in serving.Model.
	StaticMemory  int64 `json:"static_memory"`
	DynamicMemory int64 `json:"dynamic_memory"`
}

// Validate reports the first thing wrong with m.
func (m Model) Validate() error {
	if err := checkName("name", m.Name); err != nil {
		return err
	}
	if m.SLO <= 0 || m.SLO > MaxSLO {
		return fmt.Errorf("slo_ns: %v is not in (0, %v]", m.SLO, MaxSLO)
	}
	if m.StaticMemory < 0 || m.DynamicMemory < 0 {
		return fmt.Errorf("memory: negative (static %d, dynamic %d)", m.StaticMemory, m.DynamicMemory)
	}
	return nil
}

// Assignment is the controller's decision: each model's part from its
// epoch on (epoch.Decision.Assignment, by name). It says where a model is
// to be; Routes says where its requests go now, and the two differ while a
// move loads.
type Assignment struct {
	// Epoch numbers the decision; each write carries a larger one.
	Epoch uint64 `json:"epoch"`
	// Parts is the number of parts.
	Parts int `json:"parts"`
	// Models maps a model's name to its part in [0, Parts).
	Models map[string]int `json:"models"`
}

// Validate reports the first thing wrong with a.
func (a Assignment) Validate() error {
	if a.Parts < 1 || a.Parts > MaxParts {
		return fmt.Errorf("parts: %d is not in [1, %d]", a.Parts, MaxParts)
	}
	for _, name := range sortedKeys(a.Models) {
		if err := checkName("models key", name); err != nil {
			return err
		}
		if p := a.Models[name]; p < 0 || p >= a.Parts {
			return fmt.Errorf("models[%q]: part %d is not in [0, %d)", name, p, a.Parts)
		}
	}
	return nil
}

// Routes is the routing table frontends follow: each model's part, and
// each part's active scheduler.
type Routes struct {
	// Epoch is the epoch of the assignment these routes carry out.
	Epoch uint64 `json:"epoch"`
	// Models maps a model's name to the part serving it now.
	Models map[string]int `json:"models"`
	// Schedulers maps a part to its active scheduler's address. A part
	// missing here has no active scheduler (a failover is under way).
	Schedulers map[int]string `json:"schedulers"`
}

// Route returns the part serving model and its active scheduler's
// address; ok is false when the model has no route or its part no active
// scheduler.
func (r Routes) Route(model string) (part int, addr string, ok bool) {
	part, ok = r.Models[model]
	if !ok {
		return 0, "", false
	}
	addr, ok = r.Schedulers[part]
	return part, addr, ok
}

// Validate reports the first thing wrong with r.
func (r Routes) Validate() error {
	for _, name := range sortedKeys(r.Models) {
		if err := checkName("models key", name); err != nil {
			return err
		}
		if err := checkPart(fmt.Sprintf("models[%q]", name), r.Models[name]); err != nil {
			return err
		}
	}
	for p, addr := range r.Schedulers {
		if err := checkPart("schedulers key", p); err != nil {
			return err
		}
		if err := checkAddress(fmt.Sprintf("schedulers[%d]", p), addr); err != nil {
			return err
		}
	}
	return nil
}

// record is what the registry stores: the six value types.
type record interface {
	Scheduler | Backend | Frontend | Model | Assignment | Routes
	Validate() error
}

// kindOf names a record type in errors.
func kindOf[T record]() string {
	var v T
	switch any(v).(type) {
	case Scheduler:
		return "scheduler"
	case Backend:
		return "backend"
	case Frontend:
		return "frontend"
	case Model:
		return "model"
	case Assignment:
		return "assignment"
	default:
		return "routes"
	}
}

// DecodeError is a registry value that does not decode or is not valid.
type DecodeError struct {
	// Kind is the record type ("scheduler", "backend", "frontend",
	// "model", "assignment", "routes"); Key the etcd key, when known.
	Kind, Key string
	Err       error
}

func (e *DecodeError) Error() string {
	where := ""
	if e.Key != "" {
		where = " at " + strconv.Quote(e.Key)
	}
	return "registry: bad " + e.Kind + " record" + where + ": " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Encode validates v and writes it as compact JSON.
func Encode[T record](v T) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("registry: %s record: %w", kindOf[T](), err)
	}
	return json.Marshal(v)
}

// Decode reads one record strictly: a single JSON object of at most
// MaxValueBytes, with only T's fields, each at most once, spelled exactly,
// no key repeated in any object, nothing after it, and a value that
// passes T's Validate. Errors are *DecodeError.
func Decode[T record](b []byte) (T, error) {
	var v T
	if err := decodeStrict(b, &v); err != nil {
		var zero T
		return zero, &DecodeError{Kind: kindOf[T](), Err: err}
	}
	if err := v.Validate(); err != nil {
		var zero T
		return zero, &DecodeError{Kind: kindOf[T](), Err: err}
	}
	return v, nil
}

// DecodeScheduler, DecodeBackend, DecodeFrontend, DecodeModel,
// DecodeAssignment and DecodeRoutes are Decode for each record type.
func DecodeScheduler(b []byte) (Scheduler, error)   { return Decode[Scheduler](b) }
func DecodeBackend(b []byte) (Backend, error)       { return Decode[Backend](b) }
func DecodeFrontend(b []byte) (Frontend, error)     { return Decode[Frontend](b) }
func DecodeModel(b []byte) (Model, error)           { return Decode[Model](b) }
func DecodeAssignment(b []byte) (Assignment, error) { return Decode[Assignment](b) }
func DecodeRoutes(b []byte) (Routes, error)         { return Decode[Routes](b) }

func decodeStrict(b []byte, v any) error {
	if len(b) > MaxValueBytes {
		return fmt.Errorf("%d bytes, over the limit of %d", len(b), MaxValueBytes)
	}
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	// encoding/json matches field names without regard to case and keeps
	// the last of repeated keys; a first pass over the tokens refuses both.
	if err := checkObject(b, jsonFields(reflect.TypeOf(v).Elem())); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the record")
	}
	return nil
}

// jsonFields is the set of JSON names of struct type t's fields.
func jsonFields(t reflect.Type) map[string]bool {
	m := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		m[name] = true
	}
	return m
}

// checkObject checks that b is one JSON object whose keys are all in
// fields, and that no object in it repeats a key.
func checkObject(b []byte, fields map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("want a JSON object, got %v", tok)
	}
	return walkObject(dec, fields, 1)
}

const maxDepth = 8

// walkObject reads an object's members after its '{' through its '}';
// top-level keys must be in fields (nil: any key).
func walkObject(dec *json.Decoder, fields map[string]bool, depth int) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		if fields != nil && !fields[key] {
			return fmt.Errorf("unknown field %q", key)
		}
		if seen[key] {
			return fmt.Errorf("key %q repeated", key)
		}
		seen[key] = true
		if err := walkValue(dec, depth); err != nil {
			return err
		}
	}
	_, err := dec.Token() // '}'
	return err
}

func walkValue(dec *json.Decoder, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxDepth {
		return fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if d == '{' {
		return walkObject(dec, nil, depth+1)
	}
	for dec.More() {
		if err := walkValue(dec, depth+1); err != nil {
			return err
		}
	}
	_, err = dec.Token() // ']'
	return err
}

// checkName accepts what can be one segment of a key: 1 to MaxNameBytes
// bytes of printable characters, no '/', not "." or "..".
func checkName(field, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s: empty", field)
	case len(s) > MaxNameBytes:
		return fmt.Errorf("%s: %d bytes, over %d", field, len(s), MaxNameBytes)
	case s == "." || s == "..":
		return fmt.Errorf("%s: %q is not a name", field, s)
	}
	for _, r := range s {
		if r == '/' || r == utf8.RuneError || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return fmt.Errorf("%s: %q has a '/', a space or an unprintable character", field, s)
		}
	}
	return nil
}

func checkPart(field string, p int) error {
	if p < 0 || p >= MaxParts {
		return fmt.Errorf("%s: part %d is not in [0, %d)", field, p, MaxParts)
	}
	return nil
}

func checkAddress(field, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %v", field, err)
	}
	if host == "" {
		return fmt.Errorf("%s: %q has no host", field, addr)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("%s: %q has no valid port", field, addr)
	}
	return nil
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
