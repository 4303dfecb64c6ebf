// Package readonlysql decides which SQL a running standalone job answers for
// someone else (hitcount query), and answers it on a fresh, limited session.
//
// A read-only session is not enough on its own: the engine honours INTO
// OUTFILE, file(), url(), remote() and friends under readonly=1. Matching the
// text with patterns is not enough either (a comment splits INTO/**/OUTFILE;
// a second statement hides behind a semicolon). So the engine itself parses:
// formatQuery turns the text into exactly one canonical statement (and refuses
// several), EXPLAIN AST shows its tree, the tree is checked here against an
// allowlist, and the canonical text — the very statement that was checked —
// is what runs.
package readonlysql

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Querier runs SQL on the engine and returns the output in a format
// ("TSV", "TSVWithNamesAndTypes", ...). *chdb.Engine is one.
type Querier interface {
	Query(ctx context.Context, sql, format string) ([]byte, error)
}

// RefusedError says why a statement is not served.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string {
	return "refused: " + e.Reason + " (only one SELECT without INTO OUTFILE, FORMAT, SETTINGS or functions that reach files, URLs, processes or other servers is served while the job runs; stop the job for anything else)"
}

// safeTableFunctions may appear in FROM: they make rows out of numeric
// arguments (or, view, out of a query that is checked like the rest) and
// touch nothing outside the query. Every other table function (file, url, s3,
// remote, mysql, executable, filesystem, input, ...) is refused, since new
// ones arrive with every engine release and refusing by default keeps the
// next one out too. values, generateRandom, null and format are refused as
// well: their structure argument is a string the engine parses later, where
// a column's ALIAS or DEFAULT expression (file(...)) hides from this check.
var safeTableFunctions = map[string]bool{
	"numbers": true, "numbers_mt": true, "zeros": true, "zeros_mt": true,
	"generate_series": true, "generateseries": true, "primes": true, "view": true,
}

// pureScalars share a name with a table function but, called as a scalar,
// only compute: format('{} {}', a, b).
var pureScalars = map[string]bool{"format": true}

// refusedFunction reports whether a function name (lower case), called as a
// scalar, is refused: a table function's name (file is both), and the
// scalar functions that reach outside the query.
func refusedFunction(name string, tableFuncs map[string]bool) bool {
	switch {
	case tableFuncs[name] && !pureScalars[name] && !safeTableFunctions[name]:
		return true
	case name == "catboostevaluate", name == "modelevaluate": // load a model file and a library
		return true
	case strings.HasPrefix(name, "dict"): // a dictionary's source may be a URL, a database or a program
		return true
	case strings.HasPrefix(name, "addressto"), name == "demangle": // the process's memory layout
		return true
	}
	return false
}

// allowedNodes are the kinds of EXPLAIN AST node a SELECT for analytics is
// made of. Any other kind is refused: a node that does not show what it
// holds (APPLY(file) prints as a bare ColumnsApplyTransformer) would let a
// function past the check, and an unknown kind may be one.
var allowedNodes = map[string]bool{
	"SelectWithUnionQuery": true, "SelectIntersectExceptQuery": true, "SelectQuery": true,
	"ExpressionList": true, "Literal": true, "Function": true, "Identifier": true, "Subquery": true,
	"TableIdentifier": true, "TablesInSelectQuery": true, "TablesInSelectQueryElement": true,
	"TableExpression": true, "TableJoin": true, "ArrayJoin": true, "SampleRatio": true,
	"Asterisk": true, "QualifiedAsterisk": true, "ColumnsRegexpMatcher": true, "ColumnsListMatcher": true,
	"QualifiedColumnsRegexpMatcher": true, "QualifiedColumnsListMatcher": true,
	"ColumnsTransformerList": true, "ColumnsExceptTransformer": true,
	"ColumnsReplaceTransformer": true, "ColumnsReplaceTransformer::Replacement": true,
	"WithElement": true, "OrderByElement": true, "Interpolate": true, "InterpolateElement": true,
	"WindowDefinition": true, "WindowListElement": true, "LimitByElement": true,
}

// refusedTable reports whether a (database.)table name (lower case) is
// refused: system tables that talk to Keeper or other servers when read.
func refusedTable(name string) bool {
	db, table, qualified := strings.Cut(name, ".")
	if !qualified {
		table = db
	} else if db != "system" {
		return false
	}
	for _, p := range []string{"zookeeper", "distributed_ddl_queue", "replicas", "database_replicas", "s3queue", "azure_queue", "kafka_consumers", "named_collections", "stack_trace", "symbols"} {
		if strings.HasPrefix(table, p) {
			return qualified || p == "zookeeper"
		}
	}
	return false
}

// Gate checks statements on one engine.
type Gate struct {
	tableFuncs map[string]bool // every table function the engine has, lower case
}

// NewGate reads the engine's table functions, so that every one of them
// but the safe ones is refused, including those added after this was written.
func NewGate(ctx context.Context, q Querier) (*Gate, error) {
	out, err := q.Query(ctx, "SELECT lower(name) FROM system.table_functions", "TSV")
	if err != nil {
		return nil, fmt.Errorf("read-only SQL gate: list table functions: %w", err)
	}
	g := &Gate{tableFuncs: map[string]bool{}}
	for _, name := range strings.Fields(string(out)) {
		g.tableFuncs[name] = true
	}
	if !g.tableFuncs["file"] {
		return nil, errors.New("read-only SQL gate: the engine lists no file table function: refusing to guess what it can reach")
	}
	return g, nil
}

// Check parses sql on the engine and returns the canonical statement to run,
// or a *RefusedError (or the engine's syntax error).
func (g *Gate) Check(ctx context.Context, q Querier, sql string) (string, error) {
	// Hex keeps the text out of any quoting: nothing in it can end a literal.
	out, err := q.Query(ctx, "SELECT formatQuerySingleLine(unhex('"+hex.EncodeToString([]byte(sql))+"'))", "RawBLOB")
	if err != nil {
		return "", err
	}
	canonical := strings.TrimSpace(string(out))
	if canonical == "" {
		return "", &RefusedError{Reason: "no statement"}
	}
	tree, err := q.Query(ctx, "EXPLAIN AST "+canonical, "TSVRaw")
	if err != nil {
		return "", err
	}
	if err := g.checkTree(string(tree)); err != nil {
		return "", err
	}
	return canonical, nil
}

// node is one line of EXPLAIN AST: "  Function file (children 1)".
type node struct {
	depth      int
	kind, name string
}

func parseTree(tree string) []node {
	var nodes []node
	for _, line := range strings.Split(strings.TrimRight(tree, "\n"), "\n") {
		text := strings.TrimLeft(line, " ")
		n := node{depth: len(line) - len(text)}
		n.kind, n.name, _ = strings.Cut(text, " ")
		// What follows the name in parentheses (children N, alias x) is
		// not part of it.
		n.name, _, _ = strings.Cut(n.name, " (")
		n.name = strings.ToLower(n.name)
		nodes = append(nodes, n)
	}
	return nodes
}

func (g *Gate) checkTree(tree string) error {
	nodes := parseTree(tree)
	if len(nodes) == 0 || nodes[0].kind != "SelectWithUnionQuery" {
		what := "an empty statement"
		if len(nodes) > 0 {
			what = nodes[0].kind
		}
		return &RefusedError{Reason: "not a SELECT (" + what + ")"}
	}
	// parents[d] is the kind of the latest node at depth d.
	var parents []string
	for i, n := range nodes {
		if i > 0 && n.depth == 0 {
			return &RefusedError{Reason: "more than one statement"}
		}
		if n.depth > len(parents) {
			return fmt.Errorf("read-only SQL gate: unexpected EXPLAIN AST line %d: %q", i+1, tree)
		}
		parents = append(parents[:n.depth], n.kind)
		parent := ""
		if n.depth > 0 {
			parent = parents[n.depth-1]
		}
		switch {
		case parent == "SelectWithUnionQuery" && n.kind != "ExpressionList":
			// INTO OUTFILE (a Literal), FORMAT (an Identifier) and
			// SETTINGS (Set) hang off the query, beside its selects.
			return &RefusedError{Reason: "INTO OUTFILE, FORMAT or SETTINGS (" + n.kind + " " + n.name + ")"}
		case n.kind == "Set":
			return &RefusedError{Reason: "SETTINGS"}
		case n.kind == "ColumnsApplyTransformer":
			return &RefusedError{Reason: "APPLY (its function does not show in the parsed statement)"}
		case !allowedNodes[n.kind]:
			return &RefusedError{Reason: "the construct " + n.kind}
		case n.kind == "Function" && refusedFunction(n.name, g.tableFuncs):
			return &RefusedError{Reason: "function " + n.name}
		case n.kind == "Function" && parent == "TableExpression" && !safeTableFunctions[n.name]:
			return &RefusedError{Reason: "table function " + n.name}
		case (n.kind == "TableIdentifier" || n.kind == "Identifier") && refusedTable(n.name):
			return &RefusedError{Reason: "table " + n.name}
		}
	}
	return nil
}
