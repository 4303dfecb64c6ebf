package parser

import "bytes"

// closingQuote returns the index in b of the first '"' that is not escaped by a
// backslash, or -1. Apache escapes '"' as \" inside quoted fields; nginx writes
// \x22, so for nginx logs the first quote is already the closing one.
func closingQuote(b []byte) int {
	off := 0
	for {
		i := bytes.IndexByte(b[off:], '"')
		if i < 0 {
			return -1
		}
		i += off
		n := 0
		for j := i - 1; j >= 0 && b[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return i
		}
		off = i + 1
	}
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// unescapeLog decodes the escapes nginx and Apache write inside quoted fields
// (\" \\ \xHH, and Apache's \n \r \t \v \f \b) by appending to dst, which must have
// room for len(src) more bytes so that earlier fields aliasing dst stay valid. An
// unknown or truncated escape is kept as written: the line is still a hit, and
// losing the backslash would change what the operator sees.
func unescapeLog(dst, src []byte) []byte {
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '\\' || i+1 >= len(src) {
			dst = append(dst, c)
			continue
		}
		switch src[i+1] {
		case '"', '\\':
			dst = append(dst, src[i+1])
			i++
		case 'n':
			dst = append(dst, '\n')
			i++
		case 'r':
			dst = append(dst, '\r')
			i++
		case 't':
			dst = append(dst, '\t')
			i++
		case 'v':
			dst = append(dst, '\v')
			i++
		case 'f':
			dst = append(dst, '\f')
			i++
		case 'b':
			dst = append(dst, '\b')
			i++
		case 'x':
			if i+3 < len(src) {
				hi, ok1 := unhex(src[i+2])
				lo, ok2 := unhex(src[i+3])
				if ok1 && ok2 {
					dst = append(dst, hi<<4|lo)
					i += 3
					continue
				}
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
