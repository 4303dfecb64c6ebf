package chdb

import (
	"errors"
	"regexp"
	"strconv"
)

var (
	// ErrLibraryMissing means libchdb.so is not where Options.LibPath says.
	ErrLibraryMissing = errors.New("libchdb.so not found")
	// ErrDataDirLocked means another process has the engine open on the data
	// directory; chDB allows one process per directory.
	ErrDataDirLocked = errors.New("data directory is in use by another process")
	// ErrOtherDataDirOpen means this process already has the engine open on a
	// different data directory; the engine serves one directory per process.
	ErrOtherDataDirOpen = errors.New("engine already open on another data directory in this process")
	// ErrClosed is returned by calls on a closed Engine.
	ErrClosed = errors.New("engine closed")
)

// libraryHint tells a person how to get the library, appended to ErrLibraryMissing.
const libraryHint = "run scripts/setup.sh --embedded-only or set HITCOUNT_CHDB_LIB to its path"

// QueryError is a statement the engine rejected. The engine survives it.
type QueryError struct {
	// Code is ClickHouse's error code ("Code: 60." gives 60), or 0 if the
	// message carries none.
	Code int
	// Name is ClickHouse's error name, such as "UNKNOWN_TABLE" or
	// "KEEPER_EXCEPTION", or "" if the message carries none.
	Name string
	// Message is the engine's message, verbatim.
	Message string
	// Query is the statement, cut to a readable length.
	Query string
}

func (e *QueryError) Error() string { return "chdb: " + e.Message }

var (
	codeRE = regexp.MustCompile(`Code: (\d+)\.`)
	// The name closes the message, e.g. "... doesn't exist. (UNKNOWN_TABLE)".
	nameRE = regexp.MustCompile(`\(([A-Z][A-Z0-9_]+)\)\s*$`)
)

func newQueryError(query, msg string) *QueryError {
	qe := &QueryError{Message: msg, Query: query}
	if len(qe.Query) > 200 {
		qe.Query = qe.Query[:200] + "..."
	}
	// Errors can arrive nested ("Code: 241. DB::Exception: Code: 241. ..."):
	// the first code is the outermost and the one callers branch on.
	if m := codeRE.FindStringSubmatch(msg); m != nil {
		qe.Code, _ = strconv.Atoi(m[1])
	}
	if m := nameRE.FindStringSubmatch(msg); m != nil {
		qe.Name = m[1]
	}
	return qe
}
