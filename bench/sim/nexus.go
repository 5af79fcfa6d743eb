package sim

import (
	"errors"

	"github.com/symphony-serving/symphony/bench/workload"
)

func newNexusEngine(w *workload.Workload, acct *accounting) (engine, error) {
	return nil, errors.New("sim: nexus not yet wired")
}
