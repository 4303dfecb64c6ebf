package parser

import "fmt"

// Error says why a line did not parse: which field, at which byte column
// (1-based), and what was wrong there.
type Error struct {
	Field  string
	Column int
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s at column %d", e.Field, e.Reason, e.Column)
}

func errAt(field string, col int, reason string) error {
	return &Error{Field: field, Column: col + 1, Reason: reason}
}
