package alerts

import (
	"context"
	"database/sql"
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
	// Row runs a query returning at most one row of (owner, token, expires).
	Row(ctx context.Context, q string) (owner string, token, expires uint64, found bool, err error)
}

// KeeperMapClaims keeps claims as rows of a ClickHouse KeeperMap table,
// written with keeper_map_strict_mode so that inserting a key that exists
// fails: no connection besides ClickHouse, for managed services (ClickHouse >=
// 23 with Keeper). The lease is an expiry time in the row; the token written
// with the row is the fencing token.
type KeeperMapClaims struct {
	sql   KeeperMapSQL
	table string
	owner string
	now   func() time.Time
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
// sweeper with reads and writes of its rows.
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

func (k *KeeperMapClaims) insert(ctx context.Context, key string, c Claim) error {
	return k.sql.Exec(ctx, fmt.Sprintf("INSERT INTO %s (key, owner, token, expires)%s VALUES ('%s', '%s', %d, %d)",
		k.table, strict, key, k.owner, c.Token, c.Expires.UnixNano()))
}

// Claim implements Claimer: insert the key; if it exists and its lease has
// expired, delete exactly that row (by its token) and try once more.
func (k *KeeperMapClaims) Claim(ctx context.Context, key string, lease time.Duration) (Claim, bool, error) {
	if !kmKey.MatchString(key) {
		return Claim{}, false, fmt.Errorf("keepermap claim: bad key %q", key)
	}
	now := k.now()
	c := Claim{Token: uint64(now.UnixNano()), Expires: now.Add(lease)}
	err := k.insert(ctx, key, c)
	if err == nil {
		return c, true, nil
	}
	if !strings.Contains(err.Error(), "Node exists") {
		return Claim{}, false, fmt.Errorf("keepermap claim %s: %w", key, err)
	}
	_, token, expires, found, err := k.sql.Row(ctx, fmt.Sprintf("SELECT owner, token, expires FROM %s WHERE key = '%s'", k.table, key))
	if err != nil {
		return Claim{}, false, fmt.Errorf("keepermap claim %s: %w", key, err)
	}
	if found && int64(expires) > now.UnixNano() {
		return Claim{}, false, nil // a live claim
	}
	if found {
		// An expired lease: remove that row only (a successor may race us;
		// strict mode lets exactly one insert win).
		if err := k.sql.Exec(ctx, fmt.Sprintf("ALTER TABLE %s DELETE WHERE key = '%s' AND token = %d%s", k.table, key, token, strict)); err != nil {
			return Claim{}, false, nil
		}
	}
	if err := k.insert(ctx, key, c); err != nil {
		if strings.Contains(err.Error(), "Node exists") {
			return Claim{}, false, nil
		}
		return Claim{}, false, fmt.Errorf("keepermap claim %s: %w", key, err)
	}
	return c, true, nil
}

// Valid implements Claimer: the row is still this claim's and unexpired.
func (k *KeeperMapClaims) Valid(ctx context.Context, key string, c Claim) (bool, error) {
	_, token, expires, found, err := k.sql.Row(ctx, fmt.Sprintf("SELECT owner, token, expires FROM %s WHERE key = '%s'", k.table, key))
	if err != nil {
		return false, fmt.Errorf("keepermap check %s: %w", key, err)
	}
	return found && token == c.Token && int64(expires) > k.now().UnixNano(), nil
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
