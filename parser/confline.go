package parser

import (
	"fmt"
	"strings"
)

// A format is often copied from the server's configuration: an nginx
// log_format directive with its name, escape= and quoted pieces over several
// lines, or an Apache LogFormat or CustomLog line with its escaped quotes.
// unwrap takes the format string out of such a directive, as the server's own
// configuration reader would, so that what works in nginx.conf or
// apache2.conf works here.

type dialect uint8

const (
	noDialect dialect = iota
	nginx
	apache
)

// unwrapped is a format string out of its directive, or the nickname a
// CustomLog line names.
type unwrapped struct {
	text  string
	named string
}

func unwrap(format string) (unwrapped, escaping, error) {
	s := strings.TrimSpace(format)
	switch {
	case hasKeyword(s, "log_format", false):
		return nginxDirective(s[len("log_format"):])
	case hasKeyword(s, "LogFormat", true):
		return apacheDirective(s[len("LogFormat"):], false)
	case hasKeyword(s, "CustomLog", true):
		return apacheDirective(s[len("CustomLog"):], true)
	case len(s) > 0 && (s[0] == '\'' || s[0] == '"'):
		if text, n, ok := nginxPieces(s); ok && pasted(s, n) {
			return unwrapped{text: text}, escDefault, nil
		}
	}
	if strings.ContainsAny(format, "\r\n") {
		return unwrapped{text: unwrapLines(format)}, escDefault, nil
	}
	return unwrapped{text: format}, escDefault, nil
}

// unwrapLines joins a format written over several lines (a YAML block keeps
// its line breaks): a log line has none, so a break and the indentation
// around it stand for the one space the format was wrapped at. Spaces within
// a line are kept as written.
func unwrapLines(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if !isSpace(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && isSpace(s[j]) {
			j++
		}
		if run := s[i:j]; strings.ContainsAny(run, "\r\n") {
			b.WriteByte(' ')
		} else {
			b.WriteString(run)
		}
		i = j
	}
	return strings.TrimSpace(b.String())
}

// pasted tells quoted pieces copied from nginx.conf from a format string that
// happens to start with a quote: pieces in single quotes, a final ';', pieces
// on several lines, or escaped quotes inside are nginx's syntax, not a line's.
func pasted(s string, pieces int) bool {
	return s[0] == '\'' || strings.HasSuffix(s, ";") || strings.Contains(s, `\"`) ||
		pieces > 1 && strings.ContainsAny(s, "\r\n")
}

func hasKeyword(s, kw string, fold bool) bool {
	if len(s) <= len(kw) || !(s[len(kw)] == ' ' || s[len(kw)] == '\t' || s[len(kw)] == '\n' || s[len(kw)] == '\r') {
		return false
	}
	if fold {
		return strings.EqualFold(s[:len(kw)], kw)
	}
	return s[:len(kw)] == kw
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// confWords splits nginx configuration text into words the way nginx's
// reader does: quoted strings with nginx's escapes, bare words, # comments;
// it stops after a ';'. quoted reports which words were quoted.
func confWords(s string) (words []string, quoted []bool, rest string, err error) {
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return words, quoted, "", nil
		}
		switch s[i] {
		case '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case ';':
			return words, quoted, s[i+1:], nil
		case '\'', '"':
			w, n, ok := nginxQuoted(s[i:])
			if !ok {
				return nil, nil, "", fmt.Errorf("unclosed %c at offset %d", s[i], i)
			}
			words, quoted = append(words, w), append(quoted, true)
			i += n
		default:
			j := i
			for j < len(s) && !isSpace(s[j]) && s[j] != ';' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				j++
			}
			words, quoted = append(words, s[i:j]), append(quoted, false)
			i = j
		}
	}
}

// nginxQuoted decodes the quoted string at the start of s as nginx's
// configuration reader does (\" \' \\ \t \r \n; any other backslash is kept)
// and returns it with the bytes it took.
func nginxQuoted(s string) (string, int, bool) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q:
			return b.String(), i + 1, true
		case c == '\\' && i+1 < len(s):
			switch s[i+1] {
			case '"', '\'', '\\':
				b.WriteByte(s[i+1])
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte('\\')
				continue
			}
			i++
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, false
}

// nginxPieces joins a sequence of quoted pieces ('...' '...';) as nginx joins
// log_format's parameters; ok is false unless s is exactly that.
func nginxPieces(s string) (text string, pieces int, ok bool) {
	words, quoted, rest, err := confWords(s)
	if err != nil || len(words) == 0 || strings.TrimSpace(rest) != "" {
		return "", 0, false
	}
	for _, q := range quoted {
		if !q {
			return "", 0, false
		}
	}
	return strings.Join(words, ""), len(words), true
}

// nginxDirective reads the rest of `log_format name [escape=...] '...' ...;`.
func nginxDirective(s string) (unwrapped, escaping, error) {
	words, quoted, rest, err := confWords(s)
	if err != nil {
		return unwrapped{}, 0, fmt.Errorf("log_format: %w", err)
	}
	if strings.TrimSpace(rest) != "" {
		return unwrapped{}, 0, fmt.Errorf("log_format: more text after its ';': %q", strings.TrimSpace(rest))
	}
	if len(words) < 2 || quoted[0] {
		return unwrapped{}, 0, fmt.Errorf("log_format needs a name, then the format: log_format main '...';")
	}
	words = words[1:]
	esc := escDefault
	if v, ok := strings.CutPrefix(words[0], "escape="); ok {
		switch v {
		case "default":
		case "json":
			esc = escJSON
		case "none":
			esc = escNone
		default:
			return unwrapped{}, 0, fmt.Errorf("log_format: escape=%s: want default, json or none", v)
		}
		words = words[1:]
	}
	if len(words) == 0 {
		return unwrapped{}, 0, fmt.Errorf("log_format has a name but no format")
	}
	return unwrapped{text: strings.Join(words, "")}, esc, nil
}

// apacheWords splits an Apache configuration line into arguments as
// ap_getword_conf does: a quoted argument loses its quotes and the backslash
// before an inner quote of its kind; a backslash at a line's end continues it.
func apacheWords(s string) ([]string, []bool, error) {
	s = strings.NewReplacer("\\\r\n", "", "\\\n", "").Replace(s)
	var words []string
	var quoted []bool
	for i := 0; ; {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return words, quoted, nil
		}
		if q := s[i]; q == '"' || q == '\'' {
			var b strings.Builder
			j := i + 1
			for ; j < len(s) && s[j] != q; j++ {
				if s[j] == '\\' && j+1 < len(s) && s[j+1] == q {
					j++
				}
				b.WriteByte(s[j])
			}
			if j == len(s) {
				return nil, nil, fmt.Errorf("unclosed %c at offset %d", q, i)
			}
			words, quoted = append(words, b.String()), append(quoted, true)
			i = j + 1
			continue
		}
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		words, quoted = append(words, s[i:j]), append(quoted, false)
		i = j
	}
}

// apacheDirective reads the rest of `LogFormat "format" [nickname]` or
// `CustomLog file "format"|nickname [env=...|expr=...]`.
func apacheDirective(s string, custom bool) (unwrapped, escaping, error) {
	words, quoted, err := apacheWords(s)
	if err != nil {
		return unwrapped{}, 0, err
	}
	if custom {
		if len(words) < 2 {
			return unwrapped{}, 0, fmt.Errorf("CustomLog needs a file and a format or nickname")
		}
		words, quoted = words[1:], quoted[1:]
		if len(words) > 1 && !(strings.HasPrefix(words[1], "env=") || strings.HasPrefix(words[1], "expr=")) {
			return unwrapped{}, 0, fmt.Errorf("CustomLog: unexpected %q after the format", words[1])
		}
		if !quoted[0] && !strings.Contains(words[0], "%") {
			return unwrapped{named: words[0]}, escDefault, nil
		}
		return unwrapped{text: words[0]}, escDefault, nil
	}
	if len(words) == 0 || len(words) > 2 {
		return unwrapped{}, 0, fmt.Errorf(`LogFormat takes a format and an optional nickname: LogFormat "%%h %%l %%u %%t \"%%r\" %%>s %%b" common`)
	}
	return unwrapped{text: words[0]}, escDefault, nil
}

// dialectOf tells an nginx log_format string ($variables) from an Apache
// LogFormat string (%directives).
func dialectOf(s string) dialect {
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '$' && (isVarChar(s[i+1]) || s[i+1] == '{') {
			return nginx
		}
	}
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '%' {
			return apache
		}
	}
	return noDialect
}
