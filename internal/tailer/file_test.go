package tailer

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
)

func write(t *testing.T, path string, data []byte) *os.File {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func gz(data []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	return b.Bytes()
}

// A log keeps its identity when renamed, copied or gzipped; another site or
// another first line is another identity; no complete first line, no identity.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	content := []byte("1.2.3.4 - - [22/Nov/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"\nsecond line\n")
	plain, err := Fingerprint(write(t, filepath.Join(dir, "access.log"), content), "www")
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := Fingerprint(write(t, filepath.Join(dir, "access.log.1.gz"), gz(content)), "www")
	if err != nil {
		t.Fatal(err)
	}
	if plain.ID != zipped.ID || plain.Gzip || !zipped.Gzip {
		t.Errorf("plain %+v and gzipped %+v copies differ", plain, zipped)
	}
	grown, _ := Fingerprint(write(t, filepath.Join(dir, "grown.log"), append(content, "third\n"...)), "www")
	if grown.ID != plain.ID {
		t.Error("appending lines changed the identity")
	}
	otherSite, _ := Fingerprint(write(t, filepath.Join(dir, "a.log"), content), "blog")
	otherHead, _ := Fingerprint(write(t, filepath.Join(dir, "b.log"), append([]byte("x"), content...)), "www")
	if otherSite.ID == plain.ID || otherHead.ID == plain.ID {
		t.Error("a different site or first line kept the identity")
	}
	if _, err := Fingerprint(write(t, filepath.Join(dir, "partial.log"), []byte("no newline yet")), "www"); !errors.Is(err, ErrNotReady) {
		t.Errorf("partial first line: err = %v, want ErrNotReady", err)
	}
}

// Two logs that start with the same request in the same second (a health
// check, a proxy's probe) are two identities as soon as their second lines
// differ; a one-line file has only its first-line identity, the one every
// source shipped before two-line identities has (the hash is unchanged).
func TestFingerprintTwoLines(t *testing.T) {
	dir := t.TempDir()
	first := "10.0.0.1 - - [22/Nov/2026:10:00:00 +0000] \"GET /healthz HTTP/1.1\" 200 2 \"-\" \"probe\"\n"
	a, err := Fingerprint(write(t, filepath.Join(dir, "a.log"), []byte(first+"a second\n")), "www")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Fingerprint(write(t, filepath.Join(dir, "b.log"), []byte(first+"b second\n")), "www")
	if err != nil {
		t.Fatal(err)
	}
	if !a.HasBoth || !b.HasBoth || a.ID != a.Both || a.ID == b.ID || a.First != b.First {
		t.Fatalf("same first line, different second: %+v %+v", a, b)
	}
	one, err := Fingerprint(write(t, filepath.Join(dir, "one.log"), []byte(first+"partial")), "www")
	if err != nil {
		t.Fatal(err)
	}
	if one.HasBoth || one.ID != one.First || one.First != a.First {
		t.Fatalf("one complete line: %+v", one)
	}
	// The first-line id as it always was: xxhash of site, NUL, first line.
	h := xxhash.New()
	h.WriteString("www\x00" + first)
	if one.First != h.Sum64() {
		t.Fatal("the first-line identity changed: sources shipped before would be read again")
	}
	if !a.Has(a.First) || !a.Has(a.Both) || a.Has(b.Both) || one.Has(a.Both) {
		t.Fatal("Has")
	}
	// Lines longer than the window: the first 2 KiB stand for the two.
	long := bytes.Repeat([]byte("x"), 3000)
	l, err := Fingerprint(write(t, filepath.Join(dir, "long.log"), long), "www")
	if err != nil || !l.HasBoth {
		t.Fatalf("a 3000-byte line: %+v %v", l, err)
	}
	zl, err := Fingerprint(write(t, filepath.Join(dir, "long.log.gz"), gz(long)), "www")
	if err != nil || zl.ID != l.ID || zl.First != l.First {
		t.Fatalf("gzipped long line: %+v %v, plain %+v", zl, err, l)
	}
}

func TestReaderResumesAfterCommittedLine(t *testing.T) {
	dir := t.TempDir()
	data := []byte("aa\nbbb\ncccc\n")
	for _, c := range []struct {
		name string
		data []byte
		gz   bool
	}{{"plain", data, false}, {"gzip", gz(data), true}} {
		t.Run(c.name, func(t *testing.T) {
			f := write(t, filepath.Join(dir, c.name), c.data)
			r, err := NewReader(f, c.gz, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if found, err := r.SeekAfterLine(3); err != nil || !found {
				t.Fatalf("SeekAfterLine(3) = %v, %v", found, err)
			}
			line, off, err := r.Next()
			if err != nil || string(line) != "cccc\n" || off != 7 {
				t.Fatalf("after line at 3: %q@%d %v", line, off, err)
			}
			if _, _, err := r.Next(); err != io.EOF {
				t.Fatalf("at the end: %v", err)
			}
			// A file shorter than what its id committed (a copy taken
			// before, or a gzip of another file with the same head) has
			// nothing to read, and that is not an error.
			if found, err := r.SeekAfterLine(100); found || err != nil {
				t.Fatalf("a committed offset past the end: found %v, err %v", found, err)
			}
		})
	}
}

func TestAlignToLineEnd(t *testing.T) {
	f := write(t, filepath.Join(t.TempDir(), "a"), []byte("one\ntwo\nthr"))
	for size, want := range map[int64]int64{11: 8, 8: 8, 7: 4, 3: 0, 0: 0} {
		if got, err := AlignToLineEnd(f, size); err != nil || got != want {
			t.Errorf("AlignToLineEnd(%d) = %d, %v; want %d", size, got, err, want)
		}
	}
}

// W3C extended logs (IIS, CloudFront) start with directive lines that are
// the same in every file of a server: a file is known by its first requests
// after them (found by the adversary of issue 17: the second of two daily
// IIS files was taken for the first and never shipped). No request yet, no
// identity; a '#' block past directivesMax is lines like any other.
func TestFingerprintDirectives(t *testing.T) {
	const iis = "#Software: Microsoft Internet Information Services 10.0\n#Version: 1.0\n"
	const fields = "#Fields: date time c-ip cs-method cs-uri-stem sc-status\n"
	req := func(i int) string { return "2026-11-24 10:00:0" + string(rune('0'+i)) + " 192.0.2.1 GET /a 200\n" }
	plainID := func(t *testing.T, content string) (Identity, error) {
		return Fingerprint(write(t, filepath.Join(t.TempDir(), "u_ex.log"), []byte(content)), "www")
	}
	day1, err := plainID(t, iis+"#Date: 2026-11-24 00:00:00\n"+fields+req(1)+req(2))
	if err != nil {
		t.Fatal(err)
	}
	longBlock := "#" + string(bytes.Repeat([]byte("x"), directivesMax)) + "\n"
	cases := []struct {
		name    string
		content string
		gzip    bool
		want    func(id Identity) bool // nil: ErrNotReady
	}{
		{"another day", iis + "#Date: 2026-11-25 00:00:00\n" + fields + req(3) + req(4), false,
			func(id Identity) bool { return id.HasBoth && id.ID != day1.ID && id.First != day1.First }},
		{"same header, other requests", iis + "#Date: 2026-11-24 00:00:00\n" + fields + req(1) + req(5), false,
			func(id Identity) bool { return id.HasBoth && id.ID != day1.ID && id.First == day1.First }},
		{"the same file gzipped", iis + "#Date: 2026-11-24 00:00:00\n" + fields + req(1) + req(2), true,
			func(id Identity) bool { return id.Gzip && id.ID == day1.ID }},
		{"grown", iis + "#Date: 2026-11-24 00:00:00\n" + fields + req(1) + req(2) + req(3), false,
			func(id Identity) bool { return id.ID == day1.ID }},
		{"one request", iis + "#Date: 2026-11-24 00:00:00\n" + fields + req(1), false,
			func(id Identity) bool { return !id.HasBoth && id.ID == day1.First }},
		{"header only", iis + "#Date: 2026-11-24 00:00:00\n" + fields, false, nil},
		{"header and a partial request", iis + fields + "2026-11-24", false, nil},
		{"a partial header line", "#Software: Microsoft", false, nil},
		{"a '#' block past the bound: its first two lines", longBlock + "#second\n" + req(1), false,
			func(id Identity) bool {
				return id.HasBoth && id.Both == hashHead("www", 1, []byte(longBlock[:fingerprintMax]+longBlock[fingerprintMax:2*fingerprintMax]))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.content)
			if tc.gzip {
				data = gz(data)
			}
			id, err := Fingerprint(write(t, filepath.Join(t.TempDir(), "log"), data), "www")
			if tc.want == nil {
				if !errors.Is(err, ErrNotReady) {
					t.Fatalf("err = %v (%+v), want ErrNotReady", err, id)
				}
				return
			}
			if err != nil || !tc.want(id) {
				t.Fatalf("%+v %v; the first file: %+v", id, err, day1)
			}
		})
	}
}
