package tableout

import (
	"strings"
	"unicode/utf8"
)

// Values printed here are content from the network: a request path is
// whatever a client sent, and the parser decodes nginx's \x1B into a real ESC.
// Printed raw, an OSC or CSI sequence would retitle, clear or rewrite the
// operator's terminal (or hide lines from them), and a raw 0x9B byte is a CSI
// to a terminal in an 8-bit mode. So whatever reaches a terminal goes through
// one of the escapers below.

// Escape returns s as a terminal may show it, on one line: every C0 control
// (0x00-0x1F), DEL and invalid UTF-8 byte as \xNN (\t, \n and \r by name),
// every C1 control (U+0080-U+009F) and bidirectional formatting character
// (which reorders what is shown, as in "Trojan Source") as \uNNNN. Everything
// else is kept, backslashes too: this is for reading, not for parsing back,
// and paths with a literal backslash are rare. The table format and the live
// view use it.
func Escape(s string) string { return escape(s, false) }

// escapeTerminal escapes what a terminal acts on and keeps only tab and
// newline, which CSV's quoting carries: for CSV, meant for files and
// programs, yet printed often enough. A carriage return is escaped (it
// returns to the start of the line, so what follows overwrites what a
// value showed before it), and so are bidi characters.
func escapeTerminal(s string) string { return escape(s, true) }

func escape(s string, keepLayout bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, size, keepLayout) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s // the common case: nothing to do, nothing allocated
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !needsEscape(r, size, keepLayout) {
			b.WriteString(s[i : i+size])
			i += size
			continue
		}
		switch {
		case r == utf8.RuneError && size == 1:
			writeHexByte(&b, `\x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			writeHexByte(&b, `\x`, byte(r))
		default:
			b.WriteString(`\u`)
			const hex = "0123456789abcdef"
			b.Write([]byte{hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf]})
		}
		i += size
	}
	return b.String()
}

func needsEscape(r rune, size int, keepLayout bool) bool {
	switch {
	case r == utf8.RuneError && size == 1: // invalid UTF-8: a raw byte such as 0x9B
		return true
	case r == '\t' || r == '\n':
		return !keepLayout
	case r == '\r':
		return true
	case r < 0x20 || r == 0x7f: // C0, DEL
		return true
	case r >= 0x80 && r <= 0x9f: // C1
		return true
	case bidi(r), r == 0x2028, r == 0x2029: // reorder the line; break it
		return true
	}
	return false
}

// bidi reports the characters that change the display order of the text
// around them: marks, embeddings, overrides and isolates.
func bidi(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

func writeHexByte(b *strings.Builder, prefix string, c byte) {
	const hex = "0123456789abcdef"
	b.WriteString(prefix)
	b.WriteByte(hex[c>>4])
	b.WriteByte(hex[c&0xf])
}

// escapeTSV escapes a value as ClickHouse's TabSeparated format does, so the
// output can be inserted back with FORMAT TSV unchanged: \\ \t \n \r \b \f \0
// by name, and, beyond what ClickHouse itself writes, every other byte a
// terminal would act on as \xNN, which ClickHouse reads back as that byte:
// the rest of C0, DEL, the bytes of a C1 character (U+009B is \xc2\x9b), of
// a bidi or line separator character, and invalid UTF-8.
func escapeTSV(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == 0:
			b.WriteString(`\0`)
		case needsEscape(r, size, false):
			for j := range size {
				writeHexByte(&b, `\x`, s[i+j])
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// EscapeJSON makes the output of encoding/json safe for a terminal: it
// escapes C0 controls, U+2028 and U+2029 itself and turns invalid UTF-8 into
// U+FFFD, but writes DEL, C1 and bidi characters as they are. In JSON text
// they can only occur inside strings, where \u009b or \u202e mean the same
// character: escaping them loses nothing.
func EscapeJSON(js []byte) []byte {
	for i := 0; i < len(js); {
		r, size := utf8.DecodeRune(js[i:])
		if jsonEscapes(r) {
			out := make([]byte, 0, len(js)+16)
			out = append(out, js[:i]...)
			for ; i < len(js); i += size {
				r, size = utf8.DecodeRune(js[i:])
				if jsonEscapes(r) {
					const hex = "0123456789abcdef"
					out = append(out, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
					continue
				}
				out = append(out, js[i:i+size]...)
			}
			return out
		}
		i += size
	}
	return js
}

// jsonEscapes are the characters EscapeJSON writes as \uNNNN.
func jsonEscapes(r rune) bool {
	return r == 0x7f || (r >= 0x80 && r <= 0x9f) || bidi(r)
}
