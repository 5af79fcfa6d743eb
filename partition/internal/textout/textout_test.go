package textout

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"text/tabwriter"
)

func TestWriteTrimmed(t *testing.T) {
	var out strings.Builder
	err := WriteTrimmed(&out, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "name\tpart\tchange")
		fmt.Fprintln(tw, "a\t0\t")
		fmt.Fprintln(tw, "long-name\t1\t(new)")
		if err := tw.Flush(); err != nil {
			return err
		}
		_, err := io.WriteString(w, "no newline at the end  ")
		return err
	})
	want := "name       part  change\na          0\nlong-name  1     (new)\nno newline at the end"
	if err != nil || out.String() != want {
		t.Fatalf("got %q (%v), want %q", out.String(), err, want)
	}
	boom := errors.New("boom")
	out.Reset()
	if err := WriteTrimmed(&out, func(w io.Writer) error { io.WriteString(w, "half"); return boom }); err != boom || out.Len() != 0 {
		t.Errorf("a failed write: %v, wrote %q", err, out.String())
	}
}

func TestWriteNotes(t *testing.T) {
	var out strings.Builder
	WriteNotes(&out, nil)
	if out.Len() != 0 {
		t.Errorf("no notes wrote %q", out.String())
	}
	WriteNotes(&out, []string{"one", "two"})
	if want := "\nnotes:\n  - one\n  - two\n"; out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}
