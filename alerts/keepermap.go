package alerts

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/hitcount/hitcount/internal/chdb"
)

// KeeperMapSQL is what KeeperMap claims need from a ClickHouse connection:
// statements, and one row of a query. Adapters exist for the server driver and
// the embedded engine.
type KeeperMapSQL interface {
	Exec(ctx context.Context, q string) error
	// Row runs a query returning at most one row of (String, UInt64, UInt64).
	Row(ctx context.Context, q string) (owner string, token, expires uint64, found bool, err error)
}

// KeeperMapClaims keeps claims as rows of a ClickHouse KeeperMap table,
// written with keeper_map_strict_mode so that inserting a key that exists
// fails: no connection besides ClickHouse, for managed services (ClickHouse >=
// 23 with Keeper). The lease is an expiry time in the row; the token written
// with the row is the fencing token.
//
// Every lease is on the ClickHouse server's clock, never a sweeper's: the
// server computes expires when it inserts the row (now64(9) + the lease, in
// nanoseconds) and compares it with its own now64(9) when a claim is checked
// or taken over. Replicas whose clocks are hours apart then agree on which
// leases are live: read against each reader's own clock, a replica an hour
// ahead saw every other claim as expired and took it, and one an hour behind
// wrote claims that every other saw as expired. Sweepers that reach different
// servers of a cluster compare with different server clocks: their offset
// (NTP keeps it to milliseconds) comes off the lease.
type KeeperMapClaims struct {
	sql   KeeperMapSQL
	table string
	owner string
	// now is the sweeper's clock, used only for Claim.Expires (see Claim).
	now func() time.Time
}

var kmIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`)

// kmKey is what a claim key may be: it is written into SQL between quotes,
// so nothing that could end them. Crossing keys are hex (Crossing.Key), and
// about ten in sixteen start with a digit, which the identifier rule refused
// (every sweep with one failed: found by the replica race harness).
var kmKey = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ErrNoKeeperMap says the server cannot hold KeeperMap claims.
var ErrNoKeeperMap = errors.New("claims: keepermap needs ClickHouse >= 23 with Keeper configured (<zookeeper> and <keeper_map_path_prefix> in the server config)")

// OpenKeeperMapClaims creates the claims table (database.claims) if missing.
// It looks first, so that only the first start needs the right to create
// it (deploy/sql/users.sql): a table an administrator created leaves the
// sweeper with reads and writes of its rows. now is the sweeper's clock: it
// only dates Claim.Expires; leases are on the server's clock.
func OpenKeeperMapClaims(ctx context.Context, sql KeeperMapSQL, database, root, owner string, now func() time.Time) (*KeeperMapClaims, error) {
	if !kmIdent.MatchString(database) || strings.ContainsAny(root, "'\\") || strings.ContainsAny(owner, "'\\") {
		return nil, fmt.Errorf("keepermap claims: bad database, root or owner")
	}
	k := &KeeperMapClaims{sql: sql, table: database + ".claims", owner: owner, now: now}
	_, _, _, exists, err := sql.Row(ctx, "SELECT name, toUInt64(0), toUInt64(0) FROM system.tables WHERE database = '"+database+"' AND name = 'claims'")
	if err != nil {
		return nil, fmt.Errorf("keepermap claims: look for %s: %w", k.table, err)
	}
	if exists {
		return k, nil
	}
	err = sql.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+k.table+" (key String, owner String, token UInt64, expires UInt64) ENGINE = KeeperMap('"+root+"/claims') PRIMARY KEY key")
	if err != nil {
		if strings.Contains(err.Error(), "Not enough privileges") { // code 497, ACCESS_DENIED: the server says which grant
			return nil, fmt.Errorf("keepermap claims: create %s (grant CREATE TABLE on it, deploy/sql/users.sql, or have an administrator create it): %w", k.table, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNoKeeperMap, err)
	}
	return k, nil
}

const strict = " SETTINGS keeper_map_strict_mode = 1"

// serverNow is the server's clock in nanoseconds (Int64), what expires is
// written in and compared with.
const serverNow = "toUnixTimestamp64Nano(now64(9))"

// insert writes the claim row; the server dates its expiry. SETTINGS
// before SELECT is the same parser step as SETTINGS before VALUES (the
// ClickHouse 22 parser on, so every server with KeeperMap, and the embedded
// engine); strict mode applies to INSERT SELECT as to VALUES (the same
// KeeperMap sink): a key that exists fails with "Node exists".
func (k *KeeperMapClaims) insert(ctx context.Context, key string, token uint64, lease time.Duration) error {
	return k.sql.Exec(ctx, fmt.Sprintf("INSERT INTO %s (key, owner, token, expires)%s SELECT '%s', '%s', toUInt64(%d), toUInt64(%s) + toUInt64(%d)",
		k.table, strict, key, k.owner, token, serverNow, lease.Nanoseconds()))
}

// current reads key's row: its token, and whether its lease is live on the
// server's clock.
func (k *KeeperMapClaims) current(ctx context.Context, key string) (token uint64, live, found bool, err error) {
	_, token, l, found, err := k.sql.Row(ctx, fmt.Sprintf("SELECT owner, token, toUInt64(expires > %s) FROM %s WHERE key = '%s'", serverNow, k.table, key))
	return token, l == 1, found, err
}

// newToken is a fencing token: 63 random bits (it fits an Int64 wherever it
// is read), never 0. A claim's token is only ever compared for equality with
// the token in the row, so it must differ from every other claim's on the
// same key: the claimant's clock gave equal tokens to claims taken in the
// same clock tick (coarse clocks, equal clocks); two random draws are equal
// once in 2^63.
func newToken() (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		if t := binary.BigEndian.Uint64(b[:]) >> 1; t != 0 {
			return t, nil
		}
	}
}

// Claim implements Claimer: insert the key; if it exists and its lease has
// expired on the server's clock, delete exactly that row (by its token, and
// only while it is still expired) and try once more.
//
// Claim.Expires is the sweeper's own clock read before the insert, plus the
// lease: the server dates the row later than that, and both clocks run at
// the same rate whatever their offset, so the lease in the row lasts at least
// until Claim.Expires on the sweeper's clock. A caller may check the lease it
// has left against it (less the server clocks' offset in a cluster); Valid
// asks the server.
func (k *KeeperMapClaims) Claim(ctx context.Context, key string, lease time.Duration) (Claim, bool, error) {
	if !kmKey.MatchString(key) {
		return Claim{}, false, fmt.Errorf("keepermap claim: bad key %q", key)
	}
	token, err := newToken()
	if err != nil {
		return Claim{}, false, fmt.Errorf("keepermap claim %s: token: %w", key, err)
	}
	c := Claim{Token: token, Expires: k.now().Add(lease)}
	err = k.insert(ctx, key, token, lease)
	if err == nil {
		return c, true, nil
	}
	if !strings.Contains(err.Error(), "Node exists") {
		return Claim{}, false, fmt.Errorf("keepermap claim %s: %w", key, err)
	}
	held, live, found, err := k.current(ctx, key)
	if err != nil {
		return Claim{}, false, fmt.Errorf("keepermap claim %s: %w", key, err)
	}
	if found && live {
		return Claim{}, false, nil // a live claim
	}
	if found {
		// An expired lease: remove that row only (a successor may race us;
		// strict mode lets exactly one insert win). The server checks the
		// expiry again, on its clock.
		if err := k.sql.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DELETE WHERE key = '%s' AND token = %d AND expires <= %s%s", k.table, key, held, serverNow, strict)); err != nil {
			return Claim{}, false, nil
		}
	}
	if err := k.insert(ctx, key, token, lease); err != nil {
		if strings.Contains(err.Error(), "Node exists") {
			return Claim{}, false, nil
		}
		return Claim{}, false, fmt.Errorf("keepermap claim %s: %w", key, err)
	}
	return c, true, nil
}

// Valid implements Claimer: the row is still this claim's and its lease is
// live on the server's clock.
func (k *KeeperMapClaims) Valid(ctx context.Context, key string, c Claim) (bool, error) {
	token, live, found, err := k.current(ctx, key)
	if err != nil {
		return false, fmt.Errorf("keepermap check %s: %w", key, err)
	}
	return found && live && token == c.Token, nil
}

// Release implements Claimer.
func (k *KeeperMapClaims) Release(ctx context.Context, key string, c Claim) error {
	if err := k.sql.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DELETE WHERE key = '%s' AND token = %d%s", k.table, key, c.Token, strict)); err != nil {
		return fmt.Errorf("keepermap release %s: %w", key, err)
	}
	return nil
}

// EngineSQL runs KeeperMap claims on the embedded engine.
type EngineSQL struct{ Engine *chdb.Engine }

// Exec implements KeeperMapSQL.
func (e EngineSQL) Exec(ctx context.Context, q string) error { return e.Engine.Exec(ctx, q) }

// Row implements KeeperMapSQL.
func (e EngineSQL) Row(ctx context.Context, q string) (string, uint64, uint64, bool, error) {
	out, err := e.Engine.Query(ctx, q, "TSV")
	if err != nil {
		return "", 0, 0, false, err
	}
	line := strings.TrimSpace(string(out))
	if line == "" {
		return "", 0, 0, false, nil
	}
	f := strings.Split(line, "\t")
	if len(f) != 3 {
		return "", 0, 0, false, fmt.Errorf("unexpected row %q", line)
	}
	token, err1 := strconv.ParseUint(f[1], 10, 64)
	expires, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false, fmt.Errorf("unexpected row %q", line)
	}
	return f[0], token, expires, true, nil
}

// ConnSQL runs KeeperMap claims on a ClickHouse server (>= 23).
type ConnSQL struct{ Conn driver.Conn }

// Exec implements KeeperMapSQL.
func (c ConnSQL) Exec(ctx context.Context, q string) error { return c.Conn.Exec(ctx, q) }

// Row implements KeeperMapSQL.
func (c ConnSQL) Row(ctx context.Context, q string) (string, uint64, uint64, bool, error) {
	var owner string
	var token, expires uint64
	err := c.Conn.QueryRow(ctx, q).Scan(&owner, &token, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, 0, false, nil
	}
	if err != nil {
		return "", 0, 0, false, err
	}
	return owner, token, expires, true, nil
}
