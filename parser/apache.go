package parser

import (
	"fmt"
	"strings"
)

// compileApache compiles an Apache mod_log_config format string
// (https://httpd.apache.org/docs/2.4/mod/mod_log_config.html#formats) into
// raw tokens. Every directive Apache 2.4 and its bundled modules define is
// accepted; those the schema has no place for are parsed and ignored.
func compileApache(spec string) ([]token, error) {
	var toks []token
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			toks = append(toks, token{lit: lit})
			lit = nil
		}
	}
	for i := 0; i < len(spec); i++ {
		c := spec[i]
		if c == '\\' && i+1 < len(spec) {
			// mod_log_config turns \n and \t into the control characters; \"
			// is the configuration file's escape, left in a format copied
			// from a LogFormat line.
			switch spec[i+1] {
			case 'n':
				lit = append(lit, '\n')
				i++
				continue
			case 't':
				lit = append(lit, '\t')
				i++
				continue
			case '"':
				lit = append(lit, '"')
				i++
				continue
			}
		}
		if c != '%' {
			lit = append(lit, c)
			continue
		}
		start := i
		i++
		var arg string
		var hasArg, cond bool
	mods:
		for ; i < len(spec); i++ {
			switch d := spec[i]; {
			case d == '!' || d == ',' || d == '<' || d == '>':
				cond = cond || d == '!' || d == ','
			case d >= '0' && d <= '9':
				cond = true
			case d == '{':
				end := strings.IndexByte(spec[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("unclosed %%{ at offset %d", i)
				}
				arg, hasArg = spec[i+1:i+end], true
				i += end
			default:
				break mods
			}
		}
		if i == len(spec) {
			return nil, fmt.Errorf("%q at offset %d: a %% with no directive", spec[start:], start)
		}
		letter := spec[i]
		directive := string(letter)
		if letter == '^' { // %^ti, %^to, %^FB: two more letters
			if i+2 >= len(spec) {
				return nil, fmt.Errorf("%q at offset %d: unknown directive", spec[start:], start)
			}
			directive = spec[i : i+3]
			i += 2
		}
		name := spec[start : i+1]
		if letter == '%' {
			lit = append(lit, '%')
			continue
		}
		if letter == 't' && !hasArg {
			// %t is the time in brackets: [10/Oct/2000:13:55:36 -0700].
			lit = append(lit, '[')
			flush()
			toks = append(toks, token{field: fTime, name: name})
			lit = append(lit, ']')
			continue
		}
		t := token{name: name, dashOK: cond}
		var err error
		if letter == 't' {
			t.field, t.layout, err = apacheTime(arg)
		} else {
			t.field, err = apacheField(directive, arg)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		flush()
		toks = append(toks, t)
	}
	flush()
	return toks, nil
}

// apacheField maps a directive (and its {argument}) to a field.
func apacheField(d, arg string) (field, error) {
	switch d {
	case "h":
		if arg == "c" { // the TCP peer's name, before mod_remoteip
			return fPeerAddr, nil
		}
		return fRemoteAddr, nil
	case "a":
		if arg == "c" {
			return fPeerAddr, nil
		}
		return fRemoteAddr, nil
	case "u":
		return fRemoteUser, nil
	case "r":
		return fRequest, nil
	case "m":
		return fMethod, nil
	case "U":
		return fURI, nil
	case "q":
		return fQueryQ, nil
	case "H":
		return fProtocol, nil
	case "s":
		return fStatus, nil
	case "b", "B":
		return fBytes, nil
	case "O":
		return fBytesTotal, nil
	case "v", "V":
		return fHost, nil
	case "D":
		return fDurationUS, nil
	case "T":
		switch arg {
		case "", "s":
			return fDurationS, nil
		case "ms":
			return fDurationMS, nil
		case "us":
			return fDurationUS, nil
		}
		return 0, fmt.Errorf("unknown unit %q (s, ms or us)", arg)
	case "i":
		switch strings.ToLower(arg) {
		case "referer", "referrer":
			return fReferer, nil
		case "user-agent":
			return fUserAgent, nil
		case "host":
			return fHost, nil
		case "x-forwarded-for":
			return fForwardedFor, nil
		case "":
			return 0, fmt.Errorf("needs a header name: %%{Referer}i")
		}
		return fIgnore, nil
	case "C", "e", "n", "o", "x", "c": // cookie, environment, note, response header; mod_ssl's %{VAR}x and %{VAR}c
		if arg == "" && d != "c" {
			return 0, fmt.Errorf("needs a name in braces")
		}
		return fIgnore, nil
	case "A", "f", "k", "l", "L", "p", "P", "R", "X", "I", "S", "^ti", "^to", "^FB":
		return fIgnore, nil
	}
	return 0, fmt.Errorf("unknown directive")
}

// apacheTime compiles %{format}t: a strftime layout, or one of Apache's
// sec, msec, usec, msec_frac, usec_frac, optionally after begin: or end:.
func apacheTime(arg string) (field, *layout, error) {
	arg = strings.TrimPrefix(strings.TrimPrefix(arg, "begin:"), "end:")
	switch arg {
	case "sec":
		return fEpochS, nil, nil
	case "msec":
		return fEpochMS, nil, nil
	case "usec":
		return fEpochUS, nil, nil
	case "msec_frac":
		return fFracMS, nil, nil
	case "usec_frac":
		return fFracUS, nil, nil
	}
	l, err := compileLayout(arg)
	if err != nil {
		return 0, nil, err
	}
	return fStrftime, l, nil
}
