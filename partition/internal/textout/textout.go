// Package textout holds what the text reports of package partition and
// its planner (partition/provision) share: tables without the padding
// text/tabwriter leaves at line ends, and the notes after them. One
// implementation keeps `symphony partition` and `symphony provision` printing
// alike.
package textout

import (
	"bytes"
	"fmt"
	"io"
	"strings"
)

// WriteTrimmed writes to out what write writes, with the spaces at line
// ends removed: a tabwriter pads a row's last cell when it is empty, and
// trailing spaces make a report awkward to diff or to paste into docs.
func WriteTrimmed(out io.Writer, write func(w io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	var trimmed strings.Builder
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		trimmed.WriteString(strings.TrimRight(line, " \n"))
		if strings.HasSuffix(line, "\n") {
			trimmed.WriteByte('\n')
		}
	}
	_, err := io.WriteString(out, trimmed.String())
	return err
}

// WriteNotes writes a report's notes (what it did not do, or did instead)
// after its tables, one bullet each; nothing when there are none.
func WriteNotes(w io.Writer, notes []string) {
	if len(notes) == 0 {
		return
	}
	fmt.Fprintln(w, "\nnotes:")
	for _, n := range notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
}
