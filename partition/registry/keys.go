package registry

import (
	"errors"
	"strconv"
	"strings"
)

// DefaultPrefix is the key prefix the registry lives under.
const DefaultPrefix = "/symphony/"

// Keys is the key layout under one prefix P (see the package doc):
//
//	P schedulers/<part>/<name>  Scheduler   leased
//	P backends/<name>           Backend     leased
//	P frontends/<name>          Frontend    leased
//	P models/<name>             Model
//	P assignment                Assignment  written with a revision check
//	P routes                    Routes      written with a revision check
//	P elections/<part>/<lease>  (election)  concurrency.Election's keys, leased
//
// <part> is decimal with no leading zeros; <name> is a record's Name.
type Keys struct {
	prefix string
}

// NewKeys returns the layout under prefix, which must start and end with
// '/'.
func NewKeys(prefix string) (Keys, error) {
	if len(prefix) < 1 || !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return Keys{}, errors.New("registry: the key prefix must start and end with '/'")
	}
	return Keys{prefix: prefix}, nil
}

// Prefix is the prefix every key starts with.
func (k Keys) Prefix() string { return k.prefix }

// Scheduler is the key of scheduler name of part.
func (k Keys) Scheduler(part int, name string) string {
	return k.SchedulersOfPart(part) + name
}

// Schedulers is the prefix of every scheduler's key.
func (k Keys) Schedulers() string { return k.prefix + "schedulers/" }

// SchedulersOfPart is the prefix of part's schedulers' keys.
func (k Keys) SchedulersOfPart(part int) string {
	return k.Schedulers() + strconv.Itoa(part) + "/"
}

// Backend is the key of backend name; Backends their prefix.
func (k Keys) Backend(name string) string { return k.Backends() + name }
func (k Keys) Backends() string           { return k.prefix + "backends/" }

// Frontend is the key of frontend name; Frontends their prefix.
func (k Keys) Frontend(name string) string { return k.Frontends() + name }
func (k Keys) Frontends() string           { return k.prefix + "frontends/" }

// Model is the key of model name; Models their prefix.
func (k Keys) Model(name string) string { return k.Models() + name }
func (k Keys) Models() string           { return k.prefix + "models/" }

// Assignment is the key of the part assignment.
func (k Keys) Assignment() string { return k.prefix + "assignment" }

// Report is where part's active scheduler puts its Report (leased).
func (k Keys) Report(part int) string { return k.Reports() + strconv.Itoa(part) }

// Reports is the prefix of every part's Report.
func (k Keys) Reports() string { return k.prefix + "reports/" }

// Epoch is where the controller puts its last Epoch record.
func (k Keys) Epoch() string { return k.prefix + "epoch" }

// Routes is the key of the routing table.
func (k Keys) Routes() string { return k.prefix + "routes" }
