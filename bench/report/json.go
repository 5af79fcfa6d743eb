package report

import (
	"encoding/json"
	"io"
)

// EncodeJSON writes v as the `--json` outputs of the symphony commands are
// written: indented by two spaces, one value followed by a newline, and with
// <, > and & left as they are, so that a reason such as "idle > 10%" reads
// the same in the JSON as in the text output (docs/workload-format.md quotes
// them so). Every JSON output of bench/ and cmd/symphony-bench goes through
// it, so that they cannot drift apart; cmd/symphony, which must not import
// bench/, has its twin in cmd/internal/cli (WriteJSON).
func EncodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
