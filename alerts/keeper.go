package alerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// KeeperClaims keeps claims as znodes in ClickHouse Keeper or ZooKeeper, so
// any number of sweeper replicas can run: creating a node that does not exist
// yet is the claim, the node is ephemeral (it vanishes when its holder's
// session ends, which is the lease), and its creation zxid is the fencing token.
// It also elects the replica that runs each scheduled sweep (gocron's Elector),
// so replicas do not all do the same work; correctness rests on the claims alone.
type KeeperClaims struct {
	conn    *zk.Conn
	root    string
	acl     []zk.ACL
	timeout time.Duration
	log     *slog.Logger

	mu     sync.Mutex
	leader string // this replica's election node
}

// KeeperOptions say how to reach the ensemble.
type KeeperOptions struct {
	Addr           []string
	Root           string
	SessionTimeout time.Duration
	Username       string // digest auth, optional
	Password       string
	Logger         *slog.Logger
}

type zkLogger struct{ log *slog.Logger }

func (l zkLogger) Printf(format string, args ...any) { l.log.Debug(fmt.Sprintf(format, args...)) }

// OpenKeeperClaims connects and creates the claim and election paths.
func OpenKeeperClaims(ctx context.Context, o KeeperOptions) (*KeeperClaims, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	conn, events, err := zk.Connect(o.Addr, o.SessionTimeout, zk.WithLogger(zkLogger{o.Logger}))
	if err != nil {
		return nil, fmt.Errorf("keeper %v: %w", o.Addr, err)
	}
	k := &KeeperClaims{conn: conn, root: o.Root, acl: zk.WorldACL(zk.PermAll), timeout: o.SessionTimeout, log: o.Logger}
	wait, cancel := context.WithTimeout(ctx, o.SessionTimeout)
	defer cancel()
	for conn.State() != zk.StateHasSession {
		select {
		case <-events:
		case <-wait.Done():
			conn.Close()
			return nil, fmt.Errorf("keeper %v: no session within %v", o.Addr, o.SessionTimeout)
		}
	}
	go func() {
		for range events { // drained so the library never blocks on them
		}
	}()
	if o.Username != "" {
		if err := conn.AddAuth("digest", []byte(o.Username+":"+o.Password)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("keeper auth as %s: %w", o.Username, err)
		}
		k.acl = zk.DigestACL(zk.PermAll, o.Username, o.Password)
	} else {
		o.Logger.Warn("keeper: no credentials (keeper.username, keeper.password_env or password_file): claim nodes are world-writable, anyone who reaches the ensemble can delete or forge claims and so cause duplicate or lost alerts",
			"root", o.Root)
	}
	for _, p := range []string{k.claimsPath(), k.leaderPath()} {
		if err := k.ensure(p); err != nil {
			conn.Close()
			return nil, err
		}
	}
	if o.Username != "" {
		for _, p := range []string{k.root, k.claimsPath(), k.leaderPath()} {
			if err := k.closeWorld(p); err != nil {
				conn.Close()
				return nil, err
			}
		}
	}
	return k, nil
}

// closeWorld gives the credentials' ACL to a node of hitcount's own (the root
// and the two paths under it) that the world may write: the nodes a
// deployment created before it had credentials. Left world-writable, anyone
// could delete the empty claims node and recreate it open (delete is checked
// on the parent), undoing the credentials. Nodes with any other ACL were set
// by an operator and are left alone, and so are the parents above the root,
// which may be shared.
func (k *KeeperClaims) closeWorld(p string) error {
	acl, st, err := k.conn.GetACL(p)
	if err != nil {
		return fmt.Errorf("keeper: read ACL of %s: %w", p, err)
	}
	open := false
	for _, a := range acl {
		open = open || (a.Scheme == "world" && a.Perms&^zk.PermRead != 0)
	}
	if !open {
		return nil
	}
	if _, err := k.conn.SetACL(p, k.acl, st.Aversion); err != nil {
		return fmt.Errorf("keeper: %s is world-writable and its ACL cannot be restricted to the configured user: %w", p, err)
	}
	k.log.Info("keeper: restricted a world-writable node to the configured user", "path", p)
	return nil
}

func (k *KeeperClaims) claimsPath() string { return path.Join(k.root, "claims") }
func (k *KeeperClaims) leaderPath() string { return path.Join(k.root, "leader") }

// ensure creates p and its parents as persistent nodes.
func (k *KeeperClaims) ensure(p string) error {
	cur := ""
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		cur += "/" + part
		if _, err := k.conn.Create(cur, nil, 0, k.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("keeper: create %s: %w", cur, err)
		}
	}
	return nil
}

// Close ends the session: this replica's claims and election node vanish.
func (k *KeeperClaims) Close() error {
	k.conn.Close()
	return nil
}

// Healthy reports whether the session is alive: without it no claim can be
// taken, so nothing is sent.
func (k *KeeperClaims) Healthy() error {
	if s := k.conn.State(); s != zk.StateHasSession {
		return fmt.Errorf("keeper session: %v", s)
	}
	return nil
}

// Claim implements Claimer. The lease is the session: the node lives as long
// as this replica's session does.
func (k *KeeperClaims) Claim(_ context.Context, key string, _ time.Duration) (Claim, bool, error) {
	p := path.Join(k.claimsPath(), key)
	data := []byte(fmt.Sprintf("session %x", k.conn.SessionID()))
	if _, err := k.conn.Create(p, data, zk.FlagEphemeral, k.acl); err != nil {
		if !errors.Is(err, zk.ErrNodeExists) {
			return Claim{}, false, fmt.Errorf("keeper claim %s: %w", key, err)
		}
		// A node of this very session is a claim whose release failed (the
		// connection dropped while releasing): this process holds no claim
		// outside a delivery, so it is stale; left alone it would block the
		// crossing for as long as this replica lives. Anyone else's node is a
		// live claim.
		_, st, gerr := k.conn.Get(p)
		if gerr != nil || st.EphemeralOwner != k.conn.SessionID() {
			return Claim{}, false, nil
		}
		if err := k.conn.Delete(p, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return Claim{}, false, fmt.Errorf("keeper claim %s: drop stale node: %w", key, err)
		}
		if _, err := k.conn.Create(p, data, zk.FlagEphemeral, k.acl); err != nil {
			if errors.Is(err, zk.ErrNodeExists) {
				return Claim{}, false, nil
			}
			return Claim{}, false, fmt.Errorf("keeper claim %s: %w", key, err)
		}
	}
	_, st, err := k.conn.Get(p)
	if err != nil {
		return Claim{}, false, fmt.Errorf("keeper claim %s: %w", key, err)
	}
	return Claim{Token: uint64(st.Czxid), Expires: time.Now().Add(k.timeout)}, true, nil
}

// Valid implements Claimer: the node still exists, is the one this claim
// created (same creation zxid) and belongs to this live session.
func (k *KeeperClaims) Valid(_ context.Context, key string, c Claim) (bool, error) {
	if err := k.Healthy(); err != nil {
		return false, err
	}
	_, st, err := k.conn.Get(path.Join(k.claimsPath(), key))
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("keeper check %s: %w", key, err)
	}
	return uint64(st.Czxid) == c.Token && st.EphemeralOwner == k.conn.SessionID(), nil
}

// Release implements Claimer.
func (k *KeeperClaims) Release(_ context.Context, key string, c Claim) error {
	p := path.Join(k.claimsPath(), key)
	_, st, err := k.conn.Get(p)
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return fmt.Errorf("keeper release %s: %w", key, err)
	}
	if uint64(st.Czxid) != c.Token {
		return nil
	}
	if err := k.conn.Delete(p, st.Version); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("keeper release %s: %w", key, err)
	}
	return nil
}

// ErrNotLeader is IsLeader's answer on a replica that should not sweep now.
var ErrNotLeader = errors.New("another replica leads the sweeps")

// IsLeader implements gocron's Elector: the replica with the lowest
// ephemeral sequential node under root/leader runs the sweep.
func (k *KeeperClaims) IsLeader(context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.Healthy(); err != nil {
		return err
	}
	if k.leader != "" {
		if _, _, err := k.conn.Get(k.leader); errors.Is(err, zk.ErrNoNode) {
			k.leader = "" // the session that owned it expired
		}
	}
	if k.leader == "" {
		p, err := k.conn.Create(path.Join(k.leaderPath(), "n_"), nil, zk.FlagEphemeralSequential, k.acl)
		if err != nil {
			return fmt.Errorf("keeper election: %w", err)
		}
		k.leader = p
	}
	kids, _, err := k.conn.Children(k.leaderPath())
	if err != nil {
		return fmt.Errorf("keeper election: %w", err)
	}
	sort.Strings(kids)
	if len(kids) > 0 && path.Join(k.leaderPath(), kids[0]) == k.leader {
		return nil
	}
	return ErrNotLeader
}
