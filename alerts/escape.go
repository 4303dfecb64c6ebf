package alerts

import (
	"fmt"
	"strings"
	texttemplate "text/template"
	"text/template/parse"
	"unicode/utf8"
)

// textSafe escapes what must not reach a plain-text body or a header raw:
// C0 controls (CR and LF would start a line, a header or a forged body part;
// TAB would line up a forged table), DEL, C1 controls (NEL is a line break to
// some clients), the Unicode line and paragraph separators, and bytes that
// are not UTF-8. They are shown as Go-like escapes (\r, \n, \t, \x7f,
// \u0085), so the reader still sees what the log held. The backslash itself
// is left alone: paths are easier to read that way, and an escape sequence
// that was in the log already cannot break a line.
func textSafe(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// unsafeRune reports the runes textSafe escapes (invalid UTF-8 decodes as
// RuneError).
func unsafeRune(r rune) bool {
	return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == '\u2028' || r == '\u2029' || r == utf8.RuneError
}

// textSafeFunc is the name under which escapeActions calls textSafe.
const textSafeFunc = "hitcountTextSafe"

// textSafeValue prints a template value as text/template would, escaped.
func textSafeValue(v any) string {
	if v == nil {
		return "<no value>"
	}
	return textSafe(fmt.Sprint(v))
}

// parseText parses a plain-text template (subject or body, the operator's
// or ours) whose every printed value is escaped by textSafe, the way
// html/template escapes values for HTML: the template's own text (its line
// breaks) stays as written, and no value, whatever a log line put in it, can
// add a line.
func parseText(name, text string) (*texttemplate.Template, error) {
	t, err := texttemplate.New(name).Funcs(texttemplate.FuncMap{textSafeFunc: textSafeValue}).Parse(text)
	if err != nil {
		return nil, err
	}
	for _, tt := range t.Templates() {
		if tt.Tree != nil {
			escapeActions(tt.Tree.Root)
		}
	}
	return t, nil
}

// escapeActions appends textSafe to the pipeline of every action that
// prints. Declarations ({{$x := .Path}}) print nothing and keep their value
// (a range over a declared list must still work); what they hold is escaped
// where it is printed.
func escapeActions(n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			escapeActions(c)
		}
	case *parse.ActionNode:
		if len(n.Pipe.Decl) == 0 {
			n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{
				NodeType: parse.NodeCommand, Pos: n.Pos,
				Args: []parse.Node{parse.NewIdentifier(textSafeFunc).SetTree(nil).SetPos(n.Pos)},
			})
		}
	case *parse.IfNode:
		escapeActions(n.List)
		escapeActions(n.ElseList)
	case *parse.RangeNode:
		escapeActions(n.List)
		escapeActions(n.ElseList)
	case *parse.WithNode:
		escapeActions(n.List)
		escapeActions(n.ElseList)
	}
}
