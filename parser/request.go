package parser

import "bytes"

// rootPath is the path of an absolute-form target with none; shared and never
// written, so that using it costs no allocation.
var rootPath = []byte{'/'}

// splitRequest splits a request line "METHOD TARGET PROTOCOL" into h. The
// protocol is optional (HTTP/0.9, or nginx logging a request cut short), and the
// target may hold raw spaces when a broken client sent them, so the protocol is
// taken from the last space only when it looks like one.
func splitRequest(v []byte, h *Hit) {
	if len(v) == 0 || dash(v) {
		return
	}
	sp := bytes.IndexByte(v, ' ')
	if sp <= 0 || sp > 32 || !isMethod(v[:sp]) {
		h.BadRequest = v
		return
	}
	target := v[sp+1:]
	if last := bytes.LastIndexByte(target, ' '); last >= 0 && bytes.HasPrefix(target[last+1:], []byte("HTTP/")) {
		h.Protocol = target[last+1:]
		target = target[:last]
	}
	if len(target) == 0 {
		h.BadRequest = v
		h.Protocol = nil
		return
	}
	h.Method = v[:sp]
	setTarget(target, h)
}

func isMethod(m []byte) bool {
	for _, c := range m {
		if (c < 'A' || c > 'Z') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// setTarget splits a request target into path and query. An absolute-form
// target (a proxy request, "http://host/a?b") counts as its path.
func setTarget(t []byte, h *Hit) {
	h.Has |= HasRequest
	if len(t) > 0 && t[0] != '/' {
		if i := bytes.Index(t, []byte("://")); i > 0 && i <= 5 {
			rest := t[i+3:]
			if j := bytes.IndexAny(rest, "/?"); j >= 0 {
				t = rest[j:]
			} else {
				t = rootPath
			}
			if t[0] == '?' {
				// "http://host?q": the path is the root.
				h.Path = rootPath
				h.Query = t[1:]
				return
			}
		}
	}
	if q := bytes.IndexByte(t, '?'); q >= 0 {
		h.Path = t[:q]
		h.Query = t[q+1:]
		return
	}
	h.Path = t
}
