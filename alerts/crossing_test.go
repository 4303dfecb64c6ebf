package alerts

import (
	"testing"
	"time"
)

// Two different pages never share a crossing key, whatever their site names
// and request paths; pages of the usual form keep the keys recorded before
// PageSubject existed.
func TestPageSubjectsNeverCollide(t *testing.T) {
	key := func(site, path string) string {
		return Crossing{Rule: "r", Subject: PageSubject(site, path), WindowStart: time.Unix(0, 0), Threshold: 10}.Key()
	}
	pairs := []struct{ a, b [2]string }{
		{[2]string{"example.co", "m/x"}, [2]string{"example.com", "/x"}},
		{[2]string{"a/b", "/c"}, [2]string{"a", "/b/c"}},
		{[2]string{"a", "*"}, [2]string{"a*", ""}},
		{[2]string{"a", ""}, [2]string{"", "a"}},
		{[2]string{"\x001:a", "/x"}, [2]string{"a", "/x"}},
		{[2]string{"s", "http://h/x"}, [2]string{"sh", "ttp://h/x"}},
	}
	for _, p := range pairs {
		if key(p.a[0], p.a[1]) == key(p.b[0], p.b[1]) {
			t.Errorf("pages %q and %q share a crossing key", p.a, p.b)
		}
	}
	if got, want := PageSubject("www.example.com", "/pricing"), "www.example.com/pricing"; got != want {
		t.Errorf("PageSubject of a usual page = %q, want %q (the key recorded before)", got, want)
	}
}
