package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
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
	// Address is its control address (host:port), where it serves
	// health and metrics; empty for one that serves none (an in-process
	// backend).
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
	if b.Address != "" {
		if err := checkAddress("address", b.Address); err != nil {
			return err
		}
	}
	return checkNames("models", b.Models)
}

// Frontend is a frontend process, registered under a lease.
type Frontend struct {
	Name string `json:"name"`
	// DataAddress is where backends pull its requests' inputs (host:port).
	DataAddress string `json:"data_address"`
	// Routes is the mod revision of the routing table it follows: every
	// request it sends from then on goes by that table. A controller
	// lets a moved model's old part unload it only once every frontend
	// follows a table that routes the model away (Assignment.Keep).
	Routes int64 `json:"routes"`
}

// Validate reports the first thing wrong with f.
func (f Frontend) Validate() error {
	if err := checkName("name", f.Name); err != nil {
		return err
	}
	if f.Routes < 0 {
		return fmt.Errorf("routes: revision %d is negative", f.Routes)
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
	// Keep maps a model moving out of a part to that part while its
	// requests may still go there: the part's scheduler keeps serving it
	// until the controller drops it from Keep, once every frontend
	// follows routes that send it to its new part. Make before break:
	// the model is loaded in both parts meanwhile. Empty between moves.
	Keep map[string]int `json:"keep"`
	// Backends maps a backend's name to the part it serves, or FreePool
	// for none: a backend registers with its part's active scheduler and
	// moves when its entry changes. A backend missing here stays where
	// it is.
	Backends map[string]int `json:"backends"`
}

// FreePool is Assignment.Backends' part for a backend that serves no part
// (a warm spare, or one about to be stopped).
const FreePool = -1

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
	for _, name := range sortedKeys(a.Keep) {
		p, ok := a.Models[name]
		switch k := a.Keep[name]; {
		case !ok:
			return fmt.Errorf("keep[%q]: not an assigned model", name)
		case k < 0 || k >= a.Parts:
			return fmt.Errorf("keep[%q]: part %d is not in [0, %d)", name, k, a.Parts)
		case k == p:
			return fmt.Errorf("keep[%q]: part %d is the model's own part", name, k)
		}
	}
	for _, name := range sortedKeys(a.Backends) {
		if err := checkName("backends key", name); err != nil {
			return err
		}
		if p := a.Backends[name]; p < FreePool || p >= a.Parts {
			return fmt.Errorf("backends[%q]: part %d is not in [%d, %d)", name, p, FreePool, a.Parts)
		}
	}
	return nil
}

// Holds reports whether part p's scheduler is to serve model: it is
// assigned there, or kept there while it moves out.
func (a Assignment) Holds(p int, model string) bool {
	if q, ok := a.Models[model]; ok && q == p {
		return true
	}
	q, ok := a.Keep[model]
	return ok && q == p
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

// Report is what a part's active scheduler measured, each counter summed
// since Start. The epoch controller reads reports as the epoch goes and
// takes differences, so a report it misses costs nothing; a report of
// another Start (a restart or a takeover) begins a new series.
type Report struct {
	Part int `json:"part"`
	// Scheduler is the reporting scheduler's name.
	Scheduler string `json:"scheduler"`
	// Start is when its counters began, At when it wrote the report
	// (Unix nanoseconds).
	Start int64 `json:"start_ns"`
	At    int64 `json:"at_ns"`
	// Ready are the models it takes requests for now.
	Ready []string `json:"ready"`
	// Models are each model's counts.
	Models map[string]Counts `json:"models"`
	// Busy is the GPU time its batches ran; Online the GPU time its GPUs
	// could run batches (JSON: nanoseconds).
	Busy   time.Duration `json:"busy_ns"`
	Online time.Duration `json:"online_ns"`
	// Backends are the backends whose GPUs are online with it now.
	Backends []string `json:"backends"`
}

// Counts are one model's requests at a scheduler: those that arrived, and
// those that ended badly (dropped, failed, or run too late).
type Counts struct {
	Tasks uint64 `json:"tasks"`
	Bad   uint64 `json:"bad"`
}

// Validate reports the first thing wrong with r.
func (r Report) Validate() error {
	if err := checkPart("part", r.Part); err != nil {
		return err
	}
	if err := checkName("scheduler", r.Scheduler); err != nil {
		return err
	}
	switch {
	case r.Start < 0 || r.At < r.Start:
		return fmt.Errorf("at_ns: %d is before start_ns %d, or start is negative", r.At, r.Start)
	case r.Busy < 0 || r.Online < 0:
		return fmt.Errorf("busy_ns, online_ns: negative (%d, %d)", r.Busy, r.Online)
	}
	if err := checkNames("ready", r.Ready); err != nil {
		return err
	}
	for name := range r.Models {
		if err := checkName("models key", name); err != nil {
			return err
		}
	}
	return checkNames("backends", r.Backends)
}

// Epoch is the last epoch's decision as the controller recorded it, for
// `symphony cluster status` (epoch.Record, by name where it has models).
type Epoch struct {
	Epoch uint64 `json:"epoch"`
	// At is when it was decided (Unix nanoseconds); Window the epoch that
	// ended (nanoseconds).
	At     int64         `json:"at_ns"`
	Window time.Duration `json:"window_ns"`
	// Engine is the partitioning engine; Deterministic is false for one
	// whose answer depends on the machine and the time (milp, random).
	Engine        string `json:"engine"`
	Deterministic bool   `json:"deterministic"`
	// BadRate and IdleFraction are the epoch's signals over all parts.
	BadRate      float64 `json:"bad_rate"`
	IdleFraction float64 `json:"idle_fraction"`
	// GPUsBefore were in use before it, GPUs after; Need is the sized
	// need without headroom; PartGPUs each part's GPUs after.
	GPUsBefore int     `json:"gpus_before"`
	GPUs       int     `json:"gpus"`
	Need       float64 `json:"need"`
	PartGPUs   []int   `json:"part_gpus"`
	// Moves is the number of model moves; Skipped why no re-partition
	// was taken, if so.
	Moves   int    `json:"moves"`
	Skipped string `json:"skipped"`
	// Rates are the models' forecast rates (requests/s) it sized for.
	Rates map[string]float64 `json:"rates"`
}

// Validate reports the first thing wrong with e.
func (e Epoch) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"bad_rate", e.BadRate}, {"idle_fraction", e.IdleFraction}, {"need", e.Need}} {
		if f.v < 0 || math.IsInf(f.v, 0) || math.IsNaN(f.v) {
			return fmt.Errorf("%s: %v is not a non-negative number", f.name, f.v)
		}
	}
	switch {
	case e.At < 0 || e.Window < 0:
		return fmt.Errorf("at_ns, window_ns: negative (%d, %d)", e.At, e.Window)
	case e.GPUsBefore < 0 || e.GPUs < 0 || e.Moves < 0:
		return fmt.Errorf("gpus_before, gpus, moves: negative (%d, %d, %d)", e.GPUsBefore, e.GPUs, e.Moves)
	case len(e.Engine) > MaxNameBytes || len(e.Skipped) > MaxValueBytes/4:
		return errors.New("engine or skipped: too long")
	case len(e.PartGPUs) > MaxParts:
		return fmt.Errorf("part_gpus: %d parts, over %d", len(e.PartGPUs), MaxParts)
	}
	for p, n := range e.PartGPUs {
		if n < 0 {
			return fmt.Errorf("part_gpus[%d]: %d is negative", p, n)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.Rates)) {
		if err := checkName("rates key", name); err != nil {
			return err
		}
		if v := e.Rates[name]; v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("rates[%q]: %v is not a non-negative number", name, v)
		}
	}
	return nil
}

// checkNames checks each of names with checkName, and that none repeats.
func checkNames(field string, names []string) error {
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		if err := checkName(field+"["+strconv.Itoa(i)+"]", n); err != nil {
			return err
		}
		if seen[n] {
			return fmt.Errorf("%s[%d]: %q is listed twice", field, i, n)
		}
		seen[n] = true
	}
	return nil
}

// record is what the registry stores: the eight value types.
type record interface {
	Scheduler | Backend | Frontend | Model | Assignment | Routes | Report | Epoch
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
	case Report:
		return "report"
	case Epoch:
		return "epoch"
	default:
		return "routes"
	}
}

// DecodeError is a registry value that does not decode or is not valid.
type DecodeError struct {
	// Kind is the record type ("scheduler", "backend", "frontend",
	// "model", "assignment", "routes", "report", "epoch"); Key the etcd
	// key, when known.
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

// IsDecodeError reports whether err is (or wraps) a *DecodeError: a bad
// value a watcher skips, keeping the last good one, rather than an error
// that ends its watch.
func IsDecodeError(err error) bool {
	var de *DecodeError
	return errors.As(err, &de)
}

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
// DecodeAssignment, DecodeRoutes, DecodeReport and DecodeEpoch are Decode
// for each record type.
func DecodeScheduler(b []byte) (Scheduler, error)   { return Decode[Scheduler](b) }
func DecodeBackend(b []byte) (Backend, error)       { return Decode[Backend](b) }
func DecodeFrontend(b []byte) (Frontend, error)     { return Decode[Frontend](b) }
func DecodeModel(b []byte) (Model, error)           { return Decode[Model](b) }
func DecodeAssignment(b []byte) (Assignment, error) { return Decode[Assignment](b) }
func DecodeRoutes(b []byte) (Routes, error)         { return Decode[Routes](b) }
func DecodeReport(b []byte) (Report, error)         { return Decode[Report](b) }
func DecodeEpoch(b []byte) (Epoch, error)           { return Decode[Epoch](b) }

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
