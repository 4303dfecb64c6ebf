package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/hitcount/hitcount/internal/editdist"
)

// The file is decoded by walking its AST beside the Config type, field by
// field, instead of handing it to a decoder that stops at the first problem:
// every unknown key and every bad value is reported, each at its own line
// and with its own field path, and the rest of the file is still checked.

// locator knows where each field of a decoded file is.
type locator struct {
	file string
	// nodes maps a field path (sources[0].format) to its value's node, or to
	// its key's node for a section (a struct) or a null value.
	nodes map[string]ast.Node
}

// at is the position of field, or of its closest ancestor present in the
// file when the field itself is absent (a missing required key).
func (l *locator) at(field string) (line, col int) {
	if l == nil {
		return 0, 0
	}
	for p := field; p != ""; p = parent(p) {
		if n, ok := l.nodes[p]; ok {
			return pos(n)
		}
	}
	return 0, 0
}

// doc is one file being decoded and checked.
type doc struct {
	locator
	tree    *ast.File
	errs    Errors
	present map[string]bool // fields given a non-null value: they take no default
	failed  map[string]bool // fields whose value did not decode: nothing more is said about them
	anchors map[string]ast.Node
	merged  int // pairs taken in through "<<" so far, bounded against alias bombs
}

// maxMerged bounds the pairs "<<" merges may bring in over a whole file, so
// that nested merges of aliases cannot multiply into billions.
const maxMerged = 10000

func newDoc(path string, data []byte) (*doc, error) {
	d := &doc{
		locator: locator{file: path, nodes: map[string]ast.Node{}},
		present: map[string]bool{},
		failed:  map[string]bool{},
		anchors: map[string]ast.Node{},
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		d.syntaxError(err)
		return nil, d.errs.sorted()
	}
	d.tree = f
	for _, doc := range f.Docs {
		ast.Walk(anchorCollector(d.anchors), doc)
	}
	return d, nil
}

// syntaxError records a goccy-yaml parse error at the position it reports.
func (d *doc) syntaxError(err error) {
	msg, _, _ := strings.Cut(err.Error(), "\n") // never the quoted source lines
	fe := &FieldError{File: d.file, Msg: "YAML syntax: " + msg, err: err}
	var ye interface {
		GetMessage() string
		GetToken() *token.Token
	}
	if errors.As(err, &ye) {
		fe.Msg = "YAML syntax: " + ye.GetMessage()
		if tk := ye.GetToken(); tk != nil {
			fe.Line, fe.Column = tk.Position.Line, tk.Position.Column
		}
	}
	d.errs = append(d.errs, fe)
}

// anchorCollector records every &anchor so that *aliases resolve wherever
// the anchor sits (even under a key that is itself reported as unknown).
type anchorCollector map[string]ast.Node

func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

// add records a problem at node n.
func (d *doc) add(n ast.Node, field, msg string) {
	line, col := pos(n)
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Column: col, Field: field, Msg: msg})
}

// fail records that field's value is unusable, and why.
func (d *doc) fail(n ast.Node, field, msg string) {
	d.add(n, field, msg)
	d.failed[field] = true
}

// addf records a validation problem of field, located at the field (or its
// closest ancestor in the file); nothing is said about a field whose value,
// or whose ancestor's value, did not decode.
func (d *doc) addf(field, format string, args ...any) {
	if !d.ok(field) {
		return
	}
	line, col := d.at(field)
	d.errs = append(d.errs, &FieldError{File: d.file, Line: line, Column: col, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// ok reports whether the fields and their ancestors decoded.
func (d *doc) ok(fields ...string) bool {
	for _, f := range fields {
		for p := f; p != ""; p = parent(p) {
			if d.failed[p] {
				return false
			}
		}
	}
	return true
}

// pos is where a node starts, as an operator would point at it: a block
// mapping at its first key, a key-value pair at its key.
func pos(n ast.Node) (line, col int) {
	switch m := n.(type) {
	case nil:
		return 0, 0
	case *ast.MappingNode:
		if !m.IsFlowStyle && len(m.Values) > 0 {
			return pos(m.Values[0])
		}
	case *ast.MappingValueNode:
		return pos(m.Key)
	}
	tk := n.GetToken()
	if tk == nil || tk.Position == nil {
		return 0, 0
	}
	return tk.Position.Line, tk.Position.Column
}

func parent(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func itemPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// resolve looks through anchors, tags and aliases to the node that holds
// the value.
func (d *doc) resolve(n ast.Node, field string) (ast.Node, bool) {
	for range 32 { // an alias cycle ends here
		switch v := n.(type) {
		case *ast.AnchorNode:
			n = v.Value
		case *ast.TagNode:
			n = v.Value
		case *ast.AliasNode:
			name := v.Value.GetToken().Value
			target, ok := d.anchors[name]
			if !ok {
				d.fail(v, field, fmt.Sprintf("unknown alias *%s", name))
				return nil, false
			}
			n = target
		default:
			return n, true
		}
	}
	d.fail(n, field, "aliases refer to each other in a cycle")
	return nil, false
}

func isNull(n ast.Node) bool {
	_, null := n.(*ast.NullNode)
	return n == nil || null
}

// describe names what a node holds, for "must be X, got Y".
func describe(n ast.Node) string {
	switch n.(type) {
	case *ast.SequenceNode:
		return "a list"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	}
	if s, ok := scalarText(n); ok {
		return strconv.Quote(s)
	}
	return n.Type().String()
}

// scalarText is a scalar's text as written (so 1.50 stays "1.50" and a
// version-like value is not turned into a float).
func scalarText(n ast.Node) (string, bool) {
	switch v := n.(type) {
	case *ast.StringNode:
		return v.Value, true
	case *ast.LiteralNode:
		return v.Value.Value, true
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return n.GetToken().Value, true
	}
	return "", false
}

// colonScalar undoes a goccy-yaml v1.19 misreading: inside a flow mapping,
// {addr: [zk:2181]} yields the one-pair mapping {zk: 2181} where YAML reads
// the plain scalar "zk:2181" (a ':' not followed by a space is not an
// indicator). It returns the scalar when n is such a pair: an unquoted key,
// a ':' right after it and a scalar right after that, on one line.
func colonScalar(n ast.Node) (string, bool) {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) == 1 {
		n = m.Values[0]
	}
	mv, ok := n.(*ast.MappingValueNode)
	if !ok || mv.Start == nil {
		return "", false
	}
	key, colon, val := mv.Key.GetToken(), mv.Start, mv.Value.GetToken()
	v, isScalar := scalarText(mv.Value)
	k, keyScalar := scalarText(mv.Key)
	if key == nil || val == nil || !isScalar || !keyScalar || val.Position == nil ||
		key.Type == token.SingleQuoteType || key.Type == token.DoubleQuoteType ||
		key.Position.Line != colon.Position.Line || colon.Position.Line != val.Position.Line ||
		key.Position.Column+len(key.Value) != colon.Position.Column || colon.Position.Column+1 != val.Position.Column {
		return "", false
	}
	return k + ":" + v, true
}

func keyText(k ast.Node) string {
	if mk, ok := k.(*ast.MappingKeyNode); ok {
		k = mk.Value
	}
	if s, ok := scalarText(k); ok {
		return s
	}
	return k.String()
}

// isLeafStruct reports the struct types that are decoded from one scalar.
func isLeafStruct(t reflect.Type) bool {
	return t == reflect.TypeFor[Duration]() || t == reflect.TypeFor[Size]()
}

// decodeRoot fills c from the file's one document.
func (d *doc) decodeRoot(c *Config) {
	if len(d.tree.Docs) == 0 {
		return
	}
	for _, extra := range d.tree.Docs[1:] {
		if !isNull(extra.Body) {
			d.add(extra.Body, "", "a second YAML document: the config is one document (remove the ---)")
		}
	}
	root := d.tree.Docs[0].Body
	if isNull(root) {
		return // an empty file: every default
	}
	r, ok := d.resolve(root, "")
	if !ok || isNull(r) {
		return
	}
	if !isMapping(r) {
		d.add(r, "", "the file must be a mapping of sections (clickhouse:, sources:, rules:, ...), got "+describe(r))
		return
	}
	d.decodeStruct(r, reflect.ValueOf(c).Elem(), "")
}

func isMapping(n ast.Node) bool {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return true
	}
	return false
}

// decodeField decodes the value node n (reached through key, nil for a list
// item) into v.
func (d *doc) decodeField(key, n ast.Node, v reflect.Value, field string) {
	if key == nil {
		key = n
	}
	d.nodes[field] = n
	r, ok := d.resolve(n, field)
	if !ok {
		return
	}
	if isNull(r) {
		d.nodes[field] = key // absent: it takes its default
		return
	}
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && !isLeafStruct(t) {
		d.nodes[field] = key // a section: point at its name
	}
	d.present[field] = true
	d.decodeValue(r, v, field)
}

func (d *doc) decodeValue(n ast.Node, v reflect.Value, field string) {
	switch v.Type() {
	case reflect.TypeFor[Duration]():
		s, ok := scalarText(n)
		if !ok {
			d.fail(n, field, "must be a duration such as 90s, 5m, 1h or 1d, got "+describe(n))
			return
		}
		dur, err := ParseDuration(s)
		if err != nil {
			d.fail(n, field, err.Error())
			return
		}
		v.Set(reflect.ValueOf(Duration{dur}))
		return
	case reflect.TypeFor[BotFilter]():
		if b, ok := n.(*ast.BoolNode); ok {
			v.Set(reflect.ValueOf(BotFilter(strconv.FormatBool(b.Value))))
			return
		}
		s, ok := scalarText(n)
		if !ok {
			d.fail(n, field, "must be true, false, or ~ and a regular expression of user agents to leave out, got "+describe(n))
			return
		}
		f, err := parseBotFilter(s)
		if err != nil {
			d.fail(n, field, err.Error())
			return
		}
		v.Set(reflect.ValueOf(f))
		return
	case reflect.TypeFor[Size]():
		s, ok := scalarText(n)
		if !ok {
			d.fail(n, field, "must be a size such as 1MiB, got "+describe(n))
			return
		}
		b, err := ParseSize(s)
		if err != nil {
			d.fail(n, field, err.Error())
			return
		}
		v.Set(reflect.ValueOf(Size{b}))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decodeValue(n, p.Elem(), field)
		if !d.failed[field] {
			v.Set(p)
		}
	case reflect.Struct:
		d.decodeStruct(n, v, field)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.fail(n, field, "must be a list ([a, b] or one \"- item\" per line), got "+describe(n))
			return
		}
		out := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, item := range seq.Values {
			d.decodeField(nil, item, out.Index(i), itemPath(field, i))
		}
		v.Set(out)
	case reflect.String:
		s, ok := scalarText(n)
		if !ok {
			s, ok = colonScalar(n)
		}
		if !ok {
			d.fail(n, field, "must be a string, got "+describe(n))
			return
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		i, ok := integer(n)
		if !ok || v.OverflowInt(i) {
			d.fail(n, field, "must be a whole number, got "+describe(n))
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.fail(n, field, "must be true or false, got "+describe(n))
			return
		}
		v.SetBool(b.Value)
	default:
		d.fail(n, field, "internal error: no decoder for "+v.Type().String())
	}
}

// integer accepts integers, floats without a fractional part (1e3) and
// strings holding an integer ("100").
func integer(n ast.Node) (int64, bool) {
	switch v := n.(type) {
	case *ast.IntegerNode:
		switch x := v.Value.(type) {
		case int64:
			return x, true
		case uint64:
			return int64(x), x <= math.MaxInt64
		}
	case *ast.FloatNode:
		if v.Value == math.Trunc(v.Value) && math.Abs(v.Value) < 1<<53 {
			return int64(v.Value), true
		}
	case *ast.StringNode:
		i, err := strconv.ParseInt(strings.TrimSpace(v.Value), 10, 64)
		return i, err == nil
	}
	return 0, false
}

// decodeStruct decodes a mapping into a struct by its yaml tags, reporting
// every key the struct has no field for.
func (d *doc) decodeStruct(n ast.Node, v reflect.Value, field string) {
	if !isMapping(n) {
		d.fail(n, field, "must be a mapping (key: value lines or {key: value}), got "+describe(n))
		return
	}
	t := v.Type()
	_, hasSecret := fieldByTag(t, "password_env")
	for _, mv := range d.entries(n, field, 0) {
		key := keyText(mv.Key)
		f, ok := fieldByTag(t, key)
		switch {
		case !ok && key == "password" && hasSecret:
			// Never decoded, so its value appears in no message.
			d.add(mv.Key, join(field, key), "a password is not kept in the config file: use password_env (the name of an environment variable) or password_file")
		case !ok:
			msg := "unknown key"
			if s := closest(key, tagNames(t)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.add(mv.Key, join(field, key), msg)
		default:
			d.decodeField(mv.Key, mv.Value, v.FieldByIndex(f.Index), join(field, key))
		}
	}
}

// entries lists a mapping's pairs, with "<<: *anchor" merges first so that
// the mapping's own keys override them.
func (d *doc) entries(n ast.Node, field string, depth int) []*ast.MappingValueNode {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	}
	var merged, own []*ast.MappingValueNode
	for _, mv := range values {
		if _, ok := mv.Key.(*ast.MergeKeyNode); !ok {
			own = append(own, mv)
			continue
		}
		src, ok := d.resolve(mv.Value, field)
		if !ok {
			continue
		}
		srcs := []ast.Node{src}
		if seq, ok := src.(*ast.SequenceNode); ok {
			srcs = srcs[:0]
			for _, item := range seq.Values {
				if r, ok := d.resolve(item, field); ok {
					srcs = append(srcs, r)
				}
			}
		}
		for _, s := range srcs {
			if !isMapping(s) || depth > 8 {
				d.fail(mv.Value, field, "<< must merge a mapping (or a list of mappings), not nested more than 8 deep")
				continue
			}
			more := d.entries(s, field, depth+1)
			if d.merged += len(more); d.merged > maxMerged {
				if !d.failed[field] {
					d.fail(mv.Value, field, fmt.Sprintf("<< merges more than %d keys in the file", maxMerged))
				}
				return nil
			}
			merged = append(merged, more...)
		}
	}
	return append(merged, own...)
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if name := tagName(f); name != "" && name == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return ""
	}
	return name
}

func tagNames(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if name := tagName(t.Field(i)); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// closest suggests the known key nearest to a misspelt one (at most two
// edits away).
func closest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if dist := editdist.Levenshtein(strings.ToLower(key), k); dist < bestD {
			best, bestD = k, dist
		}
	}
	return best
}
