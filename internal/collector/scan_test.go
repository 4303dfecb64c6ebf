package collector

import "testing"

// Only a glob without a wildcard names a file literally, the one case where
// the file may be a symlink.
func TestGlobBase(t *testing.T) {
	for _, c := range []struct {
		glob, base string
		literal    bool
	}{
		{"/var/log/nginx/access.log", "/var/log/nginx", true},
		{"/var/log/nginx/access*.log", "/var/log/nginx", false},
		{"/var/log/*/access.log", "/var/log", false},
		{"/var/log/**/access.log", "/var/log", false},
		{"/var/log/{a,b}.log", "/var/log", false},
		{"/var/log/acc?ss.log", "/var/log", false},
		{"/var/log/a[bc].log", "/var/log", false},
		{`/var/log/a\*.log`, "/var/log", false}, // escaped: stricter, not literal
		{"/var/log/./app/../nginx/current.log", "/var/log/nginx", true},
		{"access.log", ".", true},
		{"/access.log", "/", true},
	} {
		base, literal := globBase(c.glob)
		if base != c.base || literal != c.literal {
			t.Errorf("globBase(%q) = %q, %v; want %q, %v", c.glob, base, literal, c.base, c.literal)
		}
	}
}
