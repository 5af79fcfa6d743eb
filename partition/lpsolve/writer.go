package lpsolve

import (
	"bufio"
	"io"
	"strconv"
)

// Num formats a coefficient exactly (the shortest form that reads back to
// the same float64), which both solvers' LP readers accept, exponents
// included.
func Num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// Writer writes a model in CPLEX LP format, the format both cbc and glpsol
// read. It is a thin streaming layer: the caller writes the section headers
// ("Minimize", "Subject To", "Bounds", "Binaries", "End") with Text, and
// each objective or constraint row term by term, so that a model with tens
// of thousands of variables is never held in memory twice. LP format was
// chosen over MPS because a human can read it: a dumped model file shows a
// paper's equations row by row.
//
// Write errors are sticky in the underlying bufio.Writer and reported by
// Flush.
type Writer struct {
	w     *bufio.Writer
	terms int
	names int
	// ZeroVar is the variable a row with no terms is written with (as
	// "0 ZeroVar"), so that an empty row stays well-formed. It should be a
	// variable of the model; empty means a fresh column named "zero", which
	// the solvers accept but then list in their solutions.
	ZeroVar string
}

// NewWriter returns a Writer on out.
func NewWriter(out io.Writer) *Writer { return &Writer{w: bufio.NewWriter(out)} }

// Text writes s as it is: comments ("\\ ..."), section headers, bounds.
func (w *Writer) Text(s string) { w.w.WriteString(s) }

// Row starts a constraint or objective row named name (" name:").
func (w *Writer) Row(name string) {
	w.w.WriteString(" " + name + ":")
	w.terms = 0
}

// Term adds coef·v to the open row; a zero coefficient adds nothing. Long
// rows are broken every eight terms, since some LP readers limit the line
// length.
func (w *Writer) Term(coef float64, v string) {
	if coef == 0 {
		return
	}
	if w.terms > 0 && w.terms%8 == 0 {
		w.w.WriteString("\n   ")
	}
	w.terms++
	switch {
	case coef == 1:
		w.w.WriteString(" + " + v)
	case coef == -1:
		w.w.WriteString(" - " + v)
	case coef < 0:
		w.w.WriteString(" - " + Num(-coef) + " " + v)
	default:
		w.w.WriteString(" + " + Num(coef) + " " + v)
	}
}

// zero keeps an empty row well-formed.
func (w *Writer) zero() {
	if w.terms == 0 {
		v := w.ZeroVar
		if v == "" {
			v = "zero"
		}
		w.w.WriteString(" 0 " + v)
	}
}

// End closes the open row as a constraint with sense ("<=", ">=" or "=")
// and right-hand side rhs.
func (w *Writer) End(sense string, rhs float64) {
	w.zero()
	w.w.WriteString(" " + sense + " " + Num(rhs) + "\n")
}

// EndObjective closes the open row as the objective (no sense, no
// right-hand side).
func (w *Writer) EndObjective() {
	w.zero()
	w.w.WriteString("\n")
}

// Name adds a variable to a name list (the Binaries or Generals section),
// eight to a line.
func (w *Writer) Name(v string) {
	if w.names > 0 && w.names%8 == 0 {
		w.w.WriteString("\n")
	}
	w.names++
	w.w.WriteString(" " + v)
}

// EndNames closes a name list started with Name.
func (w *Writer) EndNames() {
	w.w.WriteString("\n")
	w.names = 0
}

// Flush writes what is buffered and returns the first write error.
func (w *Writer) Flush() error { return w.w.Flush() }
