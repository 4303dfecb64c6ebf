package sink_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/sink"
)

// WithPasswordUser adds the user collector, password "right", to a running
// 18.16 server (users.d, which the server reloads within seconds) and waits
// until it can log in.
func withPasswordUser(t *testing.T, srv *testenv.ClickHouseServer) {
	t.Helper()
	sum := sha256.Sum256([]byte("right"))
	users := `<yandex><users><collector><password_sha256_hex>` + hex.EncodeToString(sum[:]) +
		`</password_sha256_hex><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></collector></users></yandex>`
	if err := os.MkdirAll(filepath.Join(srv.Dir(), "users.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srv.Dir(), "users.d", "collector.xml"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		s, err := sink.Open(context.Background(), sink.Options{Addr: []string{srv.Addr()}, Database: "hitcount", Username: "collector", Password: "right"})
		if err == nil {
			s.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the user from users.d cannot log in: %v", err)
		}
	}
}

// Every way an 18.16 server refuses a login is a LoginRefused, and Connect
// returns it at once as a LoginError naming the user and the reason,
// instead of retrying for ever as for a server that is not up.
func TestLoginRefused(t *testing.T) {
	t.Parallel()
	srv := testenv.ClickHouse(t)
	withPasswordUser(t, srv)
	cases := []struct{ user, password, want string }{
		{"collector", "wrong", `refused the login of user "collector" (WRONG_PASSWORD, code 193: Wrong password for user collector)`},
		{"collector", "", `refused the login of user "collector" (REQUIRED_PASSWORD, code 194: Password required for user collector)`},
		{"nobody", "x", `refused the login of user "nobody" (UNKNOWN_USER, code 192: Unknown user nobody)`},
		{"default", "x", `refused the login of user "default" (WRONG_PASSWORD, code 193: Wrong password for user default)`},
	}
	for _, c := range cases {
		t.Run(c.user+"/"+c.password, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			retries := 0
			_, err := sink.Connect(ctx, sink.Options{Addr: []string{srv.Addr()}, Database: "hitcount", Username: c.user, Password: c.password},
				func(error, time.Duration) { retries++ })
			var le *sink.LoginError
			if !errors.As(err, &le) || !sink.LoginRefused(err) || !strings.Contains(err.Error(), c.want) || retries != 0 {
				t.Errorf("Connect: %v after %d retries; want a LoginError at once with %q", err, retries, c.want)
			}
		})
	}
	// Not a refusal of the login: a server that is not there.
	_, err := sink.Open(context.Background(), sink.Options{Addr: []string{"127.0.0.1:1"}, Database: "hitcount"})
	if err == nil || sink.LoginRefused(err) {
		t.Errorf("nothing listening: %v, LoginRefused %v; want an error that is not a refused login", err, sink.LoginRefused(err))
	}
}
