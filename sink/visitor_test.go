package sink

import (
	"testing"
	"time"
)

// The address an anonymizing source stores: IPv4 to its /24, IPv6 to its
// /48, IPv4-mapped IPv6 as IPv4, anything that is not an address empty.
func TestAnonymizeClient(t *testing.T) {
	cases := []struct{ in, want string }{
		{"203.0.113.7", "203.0.113.0"},
		{"203.0.113.255", "203.0.113.0"},
		{"10.1.2.3", "10.1.2.0"},
		{"2001:db8:85a3:8d3:1319:8a2e:370:7348", "2001:db8:85a3::"},
		{"2001:db8:1::", "2001:db8:1::"},
		{"::1", "::"},
		{"fe80::1%eth0", "fe80::"},
		{"::ffff:198.51.100.4", "198.51.100.0"},
		{"web-1.example.com", ""},
		{"-", ""},
		{"", ""},
		{"203.0.113.7:443", ""}, // not an address as logged by any supported format
	}
	for _, c := range cases {
		if got := string(AnonymizeClient(nil, []byte(c.in))); got != c.want {
			t.Errorf("AnonymizeClient(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The visitor hash depends on the whole address, the user agent and the
// key, and on nothing else: two addresses of one /24 are two visitors.
func TestVisitorHash(t *testing.T) {
	k := VisitorKey("secret")
	if k == ([2]uint64{}) || VisitorKey("") != ([2]uint64{}) || VisitorKey("other") == k {
		t.Fatalf("keys: %v, %v, %v", k, VisitorKey(""), VisitorKey("other"))
	}
	base := VisitorHash(k, "203.0.113.7", "Mozilla/5.0")
	if VisitorHash(k, "203.0.113.7", "Mozilla/5.0") != base {
		t.Error("the hash is not stable")
	}
	for _, other := range []struct {
		key        [2]uint64
		client, ua string
	}{
		{k, "203.0.113.8", "Mozilla/5.0"},
		{k, "203.0.113.7", "Mozilla/5.1"},
		{k, "203.0.113.7Mozilla/5.0", ""}, // the join cannot be shifted
		{VisitorKey("other"), "203.0.113.7", "Mozilla/5.0"},
	} {
		if VisitorHash(other.key, other.client, other.ua) == base {
			t.Errorf("%+v hashes as 203.0.113.7 with Mozilla/5.0", other)
		}
	}
}

// A batch of an anonymizing source holds truncated addresses and the
// hashes of the whole ones, through Split and Drop alike, and does not
// allocate per line.
func TestBatchAnonymizes(t *testing.T) {
	k := VisitorKey("secret")
	b := NewBatch(4)
	b.Reset("www", 1)
	b.Clients = Clients{Key: k, Anonymize: true}
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).Unix()
	clients := []string{"203.0.113.7", "203.0.113.9", "2001:db8:1:2::5", "web-1"}
	for i, c := range clients {
		h := testHit(at)
		h.RemoteAddr = []byte(c)
		b.Add(h, int64(i*100), int64(i*100+100))
	}
	want := []string{"203.0.113.0", "203.0.113.0", "2001:db8:1::", ""}
	check := func(name string, b *Batch, from int) {
		t.Helper()
		for i, v := range b.client.views() {
			if v != want[from+i] {
				t.Errorf("%s: row %d stores client %q, want %q", name, i, v, want[from+i])
			}
			if h := VisitorHash(k, clients[from+i], "Mozilla/5.0"); b.visitor[i] != h {
				t.Errorf("%s: row %d visitor %x, want the whole address's %x", name, i, b.visitor[i], h)
			}
		}
	}
	check("batch", b, 0)
	lo, hi, ok := b.Split()
	if !ok {
		t.Fatal("no split")
	}
	check("lo", lo, 0)
	check("hi", hi, lo.Rows())
	b.Drop(Held{Hits: map[int64]bool{0: true}})
	check("dropped", b, 1)

	h := testHit(at)
	h.RemoteAddr = []byte("2001:db8:85a3:8d3:1319:8a2e:370:7348")
	fill := func() {
		b.Reset("www", 1)
		b.Clients = Clients{Key: k, Anonymize: true}
		for i := range 1000 {
			b.Add(h, int64(i*100), int64(i*100+100))
		}
	}
	fill()
	if n := testing.AllocsPerRun(20, fill); n != 0 {
		t.Errorf("%v allocations per 1000-line anonymized batch; want 0", n)
	}
}
