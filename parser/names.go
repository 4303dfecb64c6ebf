package parser

import (
	"fmt"
	"strings"

	"github.com/hitcount/hitcount/internal/editdist"
)

// NamedFormat is a format chosen by name: what it is and the format string it
// stands for.
type NamedFormat struct {
	Name string
	// Spec is the format in nginx log_format syntax. $remote_ident (the
	// ident field, Apache's %l, "-" in nginx) and $host_port (a virtual host
	// with an optional ":port") are this package's, not nginx's.
	Spec  string
	About string
}

// Named formats are lenient where servers vary: the ident field may hold
// any one word, fields may be padded with extra spaces, and data a server appends
// after the last field (nginx main's X-Forwarded-For, Apache's %D) is ignored
// when it follows a space. So a log written in a conventional format with a
// field added is never rejected line by line; name a format that keeps the
// extra field (main) or give the format string to keep it. Not lenient
// before the time: ident and user are one word each (no space, no '"'), so
// a line with more words there (a client list, a virtual host) is a reject
// rather than hits under a wrong client; a format string reads a user with
// a space.
const (
	clfCommon   = `$remote_addr $remote_ident $remote_user [$time_local] "$request" $status $body_bytes_sent`
	clfCombined = clfCommon + ` "$http_referer" "$http_user_agent"`
	nginxMain   = clfCombined + ` "$http_x_forwarded_for"`
	// clfCommonBytesSent is common with the response's bytes, headers
	// included ($bytes_sent), where common has the body's.
	clfCommonBytesSent = `$remote_addr $remote_ident $remote_user [$time_local] "$request" $status $bytes_sent`
)

var namedFormats = []NamedFormat{
	{"combined", clfCombined,
		`nginx's and Apache's combined: %h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-Agent}i"`},
	{"common", clfCommon,
		`the Common Log Format (NCSA): %h %l %u %t "%r" %>s %b`},
	{"vhost_combined", `$host_port ` + clfCombined,
		`Debian's Apache vhost_combined: %v:%p then combined (the port may be absent)`},
	{"vhost_common", `$host_port ` + clfCommon,
		`a virtual host, then common: %v %h %l %u %t "%r" %>s %b (GoAccess's VCOMMON; the port may be absent)`},
	{"main", nginxMain,
		`the official nginx image's main: combined plus "$http_x_forwarded_for"`},
	{"nginx_main", nginxMain, `the same as main`},
	{"combinedio", clfCombined + ` $request_length $bytes_sent`,
		`Apache's combinedio (mod_logio): combined plus %I %O`},
	// nginx formats found in the wild under these names, which Detect
	// should tell from combined, whose lenient tail would drop their
	// request time (issue 17, D4-D6).
	{"timed_combined", clfCombined + ` $request_time $upstream_response_time $pipe`,
		`nginx's widespread timed_combined: combined plus $request_time $upstream_response_time $pipe`},
	{"upstreaminfo", clfCombined + ` $request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id`,
		`ingress-nginx's default upstreaminfo: combined plus request length, request time, upstream name, alternative upstream name, upstream address, length, time, status and request id`},
	{"compression", clfCommonBytesSent + ` "$http_referer" "$http_user_agent" "$gzip_ratio"`,
		`the nginx documentation's compression example: combined with $bytes_sent, plus "$gzip_ratio"`},
}

// timeless are names of conventional logs that hold no time: known, so that
// choosing one says why it cannot be shipped rather than "unknown".
var timeless = map[string]string{
	"referer": `Apache's referer log ("%{Referer}i -> %U") has no time, and hits are counted by the time they were logged; log combined instead`,
	"agent":   `Apache's agent log ("%{User-agent}i") has no time, and hits are counted by the time they were logged; log combined instead`,
}

// Formats lists the names New accepts besides a format string: the token
// formats here, json, and the other servers' formats (servers.go).
func Formats() []string {
	names := make([]string, 0, len(namedFormats)+1)
	for _, nf := range namedFormats {
		names = append(names, nf.Name)
	}
	names = append(names, "json")
	return append(names, serverFormatNames()...)
}

// NamedFormats describes the named token formats, for docs and -check-log.
func NamedFormats() []NamedFormat { return append([]NamedFormat(nil), namedFormats...) }

func lookupNamed(name string) (NamedFormat, bool) {
	for _, nf := range namedFormats {
		if nf.Name == name {
			return nf, true
		}
	}
	return NamedFormat{}, false
}

// variables maps nginx variable names to fields; any other variable is parsed
// (so the line still has to match) and ignored.
var variables = map[string]field{
	"remote_addr":               fRemoteAddr,
	"realip_remote_addr":        fPeerAddr,
	"remote_user":               fRemoteUser,
	"time_local":                fTime,
	"time_iso8601":              fTimeISO,
	"msec":                      fMsec,
	"request":                   fRequest,
	"request_method":            fMethod,
	"request_uri":               fRequestURI,
	"uri":                       fURI,
	"document_uri":              fURI,
	"is_args":                   fIsArgs,
	"args":                      fArgs,
	"query_string":              fArgs,
	"server_protocol":           fProtocol,
	"status":                    fStatus,
	"body_bytes_sent":           fBytes,
	"bytes_sent":                fBytesTotal,
	"http_referer":              fReferer,
	"http_user_agent":           fUserAgent,
	"host":                      fHost,
	"http_host":                 fHost,
	"server_name":               fHost,
	"request_time":              fRequestTime,
	"http_x_forwarded_for":      fForwardedFor,
	"proxy_add_x_forwarded_for": fForwardedFor,
	"host_port":                 fHostPort, // named formats only
}

// compileNginx compiles an nginx log_format string (the quoted pieces already
// joined) into raw tokens.
func compileNginx(spec string) ([]token, error) {
	var toks []token
	var lit []byte
	for i := 0; i < len(spec); {
		if spec[i] != '$' || i+1 == len(spec) || !(isVarChar(spec[i+1]) || spec[i+1] == '{') {
			lit = append(lit, spec[i])
			i++
			continue
		}
		var name string
		if spec[i+1] == '{' {
			end := strings.IndexByte(spec[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unclosed ${ at offset %d", i)
			}
			name = spec[i+2 : i+end]
			i += end + 1
		} else {
			j := i + 1
			for j < len(spec) && isVarChar(spec[j]) {
				j++
			}
			name = spec[i+1 : j]
			i = j
		}
		if name == "" {
			return nil, fmt.Errorf("a $ with no variable name")
		}
		if len(lit) > 0 {
			toks = append(toks, token{lit: lit})
			lit = nil
		}
		toks = append(toks, token{field: variables[name], name: name})
	}
	if len(lit) > 0 {
		toks = append(toks, token{lit: lit})
	}
	return toks, nil
}

// UnknownFormatError is New's error for a format that is neither a name it
// knows nor a format string.
type UnknownFormatError struct {
	Name    string
	Suggest string // the closest known name; "" when none is close
}

func (e *UnknownFormatError) Error() string {
	if e.Suggest != "" {
		return fmt.Sprintf("unknown format %q; did you mean %q?", e.Name, e.Suggest)
	}
	return fmt.Sprintf("unknown format %q: not one of %s, nor an nginx log_format or Apache LogFormat string",
		e.Name, strings.Join(Formats(), ", "))
}

// hints are names people give a format by its server or its other names.
var hints = map[string]string{
	"nginx": "combined", "apache": "combined", "apache2": "combined", "httpd": "combined",
	"ncsa": "combined", "extended": "combined", "clf": "common", "vhost": "vhost_combined",
}

func unknownFormat(name string) error {
	suggest, ok := hints[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		suggest = closest(name, Formats())
	}
	return &UnknownFormatError{Name: name, Suggest: suggest}
}

// closest returns the candidate nearest to s by edit distance, when near
// enough to be a typo of it: at most 2 edits, and fewer than half of s.
func closest(s string, candidates []string) string {
	best, bestD := "", 3
	low := strings.ToLower(strings.TrimSpace(s))
	for _, c := range candidates {
		d := editdist.Levenshtein(low, c)
		if d < bestD && 2*d < len(c) {
			best, bestD = c, d
		}
	}
	return best
}
