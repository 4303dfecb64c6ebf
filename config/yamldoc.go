package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// doc is a parsed file: its AST answers "which line is this field on", and
// decoding goes section by section (and list item by list item) so that one
// bad value does not hide the problems after it.
type doc struct {
	path string
	file *ast.File
	root ast.Node
	errs Errors
	// failed holds the sections and list items that did not decode: their
	// values are unknown, so validation says nothing more about them.
	failed map[string]bool
}

func newDoc(path string, data []byte) (*doc, error) {
	d := &doc{path: path, failed: map[string]bool{}}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		d.addErr(err, "")
		return nil, d.errs.err()
	}
	d.file = f
	if len(f.Docs) > 0 {
		d.root = f.Docs[0].Body
	}
	return d, nil
}

// addErr records a goccy-yaml error at its token.
func (d *doc) addErr(err error, field string) {
	fe := &FieldError{File: d.path, Field: field, Msg: err.Error()}
	var ye interface {
		GetMessage() string
	}
	if errors.As(err, &ye) {
		fe.Msg = ye.GetMessage()
		if tk := tokenOf(err); tk != nil {
			fe.Line, fe.Column = tk.Position.Line, tk.Position.Column
		}
	}
	d.errs = append(d.errs, fe)
}

// add records a problem at node n (or at the file when n is nil).
func (d *doc) add(n ast.Node, field, msg string) {
	fe := &FieldError{File: d.path, Field: field, Msg: msg}
	if n != nil {
		if tk := n.GetToken(); tk != nil {
			fe.Line, fe.Column = tk.Position.Line, tk.Position.Column
		}
	}
	d.errs = append(d.errs, fe)
}

// addf records a problem with field, located at the field's value, or at its
// closest parent present in the file when the field itself is absent.
func (d *doc) addf(field, format string, args ...any) {
	for p := field; p != ""; p = parent(p) {
		if d.failed[p] {
			return
		}
	}
	d.add(d.node(field), field, fmt.Sprintf(format, args...))
}

// node finds the value node of a field path such as "sources[0].format".
func (d *doc) node(field string) ast.Node {
	if d.file == nil {
		return nil
	}
	for p := field; p != ""; p = parent(p) {
		path, err := yaml.PathString("$." + p)
		if err != nil {
			continue
		}
		if n, err := path.FilterFile(d.file); err == nil && n != nil {
			return n
		}
	}
	return d.root
}

func parent(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}

func mappingValues(n ast.Node) ([]*ast.MappingValueNode, bool) {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values, true
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}, true
	}
	return nil, false
}

func keyOf(mv *ast.MappingValueNode) string {
	if tk := mv.Key.GetToken(); tk != nil {
		return tk.Value
	}
	return mv.Key.String()
}

var (
	durationType = reflect.TypeOf(Duration{})
	sizeType     = reflect.TypeOf(Size{})
)

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name == key && name != "-" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tagNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkKeys reports every key that the type has no field for, at any depth.
func (d *doc) checkKeys(n ast.Node, t reflect.Type, path string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType || t == sizeType {
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		values, ok := mappingValues(n)
		if !ok {
			return // a type error, reported by decoding
		}
		for _, mv := range values {
			key := keyOf(mv)
			f, ok := fieldByTag(t, key)
			if !ok {
				msg := "unknown key"
				if s := closest(key, tagNames(t)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				d.add(mv.Key, join(path, key), msg)
				continue
			}
			d.checkKeys(mv.Value, f.Type, join(path, key))
		}
	case reflect.Slice:
		if seq, ok := n.(*ast.SequenceNode); ok {
			for i, v := range seq.Values {
				d.checkKeys(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
}

// decode fills cfg from the file: unknown keys are reported, then each
// top-level section and each list item is decoded on its own.
func (d *doc) decode(cfg *Config) {
	if d.root == nil {
		return
	}
	if _, ok := d.root.(*ast.NullNode); ok {
		return
	}
	values, ok := mappingValues(d.root)
	if !ok {
		d.add(d.root, "", "the file must be a mapping of sections (clickhouse:, sources:, ...)")
		return
	}
	rv := reflect.ValueOf(cfg).Elem()
	d.checkKeys(d.root, rv.Type(), "")
	for _, mv := range values {
		key := keyOf(mv)
		f, ok := fieldByTag(rv.Type(), key)
		if !ok {
			continue
		}
		fv := rv.FieldByIndex(f.Index)
		if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct {
			seq, ok := mv.Value.(*ast.SequenceNode)
			if !ok {
				if _, null := mv.Value.(*ast.NullNode); !null {
					d.add(mv.Value, key, "expected a list")
				}
				continue
			}
			out := reflect.MakeSlice(fv.Type(), len(seq.Values), len(seq.Values))
			for i, item := range seq.Values {
				if err := yaml.NodeToValue(item, out.Index(i).Addr().Interface()); err != nil {
					item := fmt.Sprintf("%s[%d]", key, i)
					d.addErr(err, item)
					d.failed[item] = true
				}
			}
			fv.Set(out)
			continue
		}
		if _, null := mv.Value.(*ast.NullNode); null {
			continue // "smtp:" with nothing under it: as if absent
		}
		isPtr := fv.Kind() == reflect.Pointer
		t := fv.Type()
		if isPtr {
			t = t.Elem()
		}
		ptr := reflect.New(t)
		if err := yaml.NodeToValue(mv.Value, ptr.Interface()); err != nil {
			d.addErr(err, key)
			d.failed[key] = true
			continue
		}
		if isPtr {
			fv.Set(ptr)
		} else {
			fv.Set(ptr.Elem())
		}
	}
}

// closest suggests the known key nearest to a misspelt one.
func closest(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if dist := levenshtein(key, k); dist < bestD {
			best, bestD = k, dist
		}
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
