package parser

import (
	"errors"
	"fmt"
)

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

// ErrDirective is what Parse returns for a line that is part of the log's
// format rather than a request: W3C extended's "#Version:" and "#Fields:"
// header lines, which IIS and CloudFront write at the top of every file. Such a
// line is neither a hit nor a reject; a W3C Parser has read the columns it
// names. Test with errors.Is.
var ErrDirective = errors.New("a format directive line, not a request")
