package config

import (
	"fmt"
	"sort"
	"strings"
)

// FieldError is one problem in a config file.
type FieldError struct {
	File   string
	Line   int // 1-based; 0 when the problem has no place in the file
	Column int
	Field  string // path such as sources[0].format; "" for the file as a whole
	Msg    string

	err error // the cause, when there is one (for errors.Is)
}

// Error formats the problem as file:line:col: field: message.
func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, e.Column)
	}
	if e.Field == "" {
		return loc + ": " + e.Msg
	}
	return loc + ": " + e.Field + ": " + e.Msg
}

// Unwrap returns the cause, such as an fs.ErrNotExist from Load.
func (e *FieldError) Unwrap() error { return e.err }

// Errors is every problem found in a file, in file order.
type Errors []*FieldError

// Error is one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As look at each problem.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sorted orders the problems by position and returns them as an error, or
// nil when there are none.
func (es Errors) sorted() error {
	if len(es) == 0 {
		return nil
	}
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Column < es[j].Column
	})
	return es
}
