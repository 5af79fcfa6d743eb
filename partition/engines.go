package partition

import (
	"fmt"
	"strings"
)

// DefaultEngine is the engine NewEngine builds for an empty name: the
// heuristic, because it answers real problem sizes in well under a second
// with no external solver, which is what an epoch job needs.
const DefaultEngine = "heuristic"

// EngineNames lists the names NewEngine accepts, default first, for flag
// help and error messages.
func EngineNames() []string { return []string{"heuristic", "milp", "random"} }

// NewEngine builds the engine a user names on the command line or in a
// configuration, so that every caller (the partition command, the Appendix
// A.2 experiment, the epoch job) gets the same engines set up the same way:
//
//   - "heuristic" (or ""): Heuristic with seed;
//   - "milp": MILP on solver ("cbc", "glpsol", a path, or "" for the first
//     installed), with the heuristic as Fallback, so that it warm-starts the
//     solver and still answers when no solver is installed or the solver
//     finds nothing in time;
//   - "random": RandomSearch with seed, the paper's baseline.
//
// seed only orders the search of the heuristic and the draws of the random
// search; solver matters only to "milp". An unknown name is an error that
// lists the valid ones.
func NewEngine(name string, seed uint64, solver string) (Engine, error) {
	switch strings.TrimSpace(name) {
	case "", "heuristic":
		return &Heuristic{Seed: seed}, nil
	case "milp":
		return &MILP{Solver: solver, Fallback: &Heuristic{Seed: seed}}, nil
	case "random":
		return &RandomSearch{Seed: seed}, nil
	}
	return nil, fmt.Errorf("partition: unknown engine %q (valid: %s)", name, strings.Join(EngineNames(), ", "))
}
