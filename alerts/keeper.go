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
	user    string // digest user, "" without credentials
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
		k.user = o.Username
	} else {
		o.Logger.Warn("keeper: no credentials (keeper.username, keeper.password_env or password_file): claim nodes are world-writable, anyone who reaches the ensemble can delete or forge claims and so cause duplicate or lost alerts",
			"root", o.Root)
	}
	if o.Username == "" {
		for _, p := range []string{k.claimsPath(), k.leaderPath()} {
			if err := k.ensure(p); err != nil {
				conn.Close()
				return nil, err
			}
		}
		return k, nil
	}
	if err := k.secure(); err != nil {
		conn.Close()
		return nil, err
	}
	return k, nil
}

// secure makes the nodes hitcount relies on (the root, root/claims and
// root/leader) carry the credentials' ACL alone, then removes the children of
// root/claims and root/leader that no sweeper with these credentials made.
//
// Every other ACL is suspect, not only scheme world: ip:0.0.0.0/0 (or any ip
// range holding a client) admits anyone as well, and an entry for another
// identity may be an attacker's own, which the sweeper cannot tell from an
// operator's. Someone the ACL admits could delete claims (duplicate
// sends), forge them (lost alerts), win every election (no sweeps), or
// delete the empty claims node and recreate it open (delete is checked on
// the parent). So a node whose ACL has an entry granting anything to an
// identity other than the configured digest user, or that does not give that
// user every permission, is set to the credentials' ACL when the sweeper may
// (it has ADMIN, often through that very ACL), with a warning naming the node
// and its old ACL; when it may not, the start fails and says what to do. An
// operator's own admin entry on these nodes is replaced too: administer
// them as ZooKeeper's superuser (superDigest), whom no ACL restricts.
// The parents above the root may be shared and are left alone: the root
// cannot be deleted while it has children.
func (k *KeeperClaims) secure() error {
	if dir := path.Dir(k.root); dir != "/" {
		if err := k.ensure(dir); err != nil {
			return err
		}
	}
	for _, p := range []string{k.root, k.claimsPath(), k.leaderPath()} {
		if err := k.own(p); err != nil {
			return err
		}
	}
	for _, p := range []string{k.claimsPath(), k.leaderPath()} {
		if err := k.dropForeign(p); err != nil {
			return err
		}
	}
	return nil
}

// own creates p with the credentials' ACL, or gives an existing p that ACL
// (see secure).
func (k *KeeperClaims) own(p string) error {
	for attempt := 1; ; attempt++ {
		_, err := k.conn.Create(p, nil, 0, k.acl)
		if err == nil {
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("keeper: create %s: %w", p, err)
		}
		acl, st, err := k.conn.GetACL(p)
		switch {
		case errors.Is(err, zk.ErrNoNode) && attempt < 5:
			continue // deleted meanwhile
		case errors.Is(err, zk.ErrNoAuth):
			return fmt.Errorf("keeper: %s exists, and the configured user %s cannot read its ACL (%w): another identity owns it (another user, or this user with another password); %s",
				p, k.user, err, k.remedy(p))
		case err != nil:
			return fmt.Errorf("keeper: read the ACL of %s: %w", p, err)
		}
		if k.sole(acl) {
			return nil
		}
		_, err = k.conn.SetACL(p, k.acl, st.Aversion)
		if (errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)) && attempt < 5 {
			continue // changed or deleted meanwhile: look again
		}
		if err != nil {
			return fmt.Errorf("keeper: %s has the ACL %s, which %s, and the configured user %s cannot change it (%w); %s",
				p, k.formatACL(acl), k.fault(acl), k.user, err, k.remedy(p))
		}
		k.log.Warn("keeper: a node hitcount relies on had an ACL that "+k.fault(acl)+"; it now admits the configured user alone. Whoever it admitted could delete or forge claims until now",
			"path", p, "old_acl", k.formatACL(acl), "user", k.user)
		return nil
	}
}

// dropForeign deletes the children of dir (root/claims or root/leader) that a
// sweeper with these credentials did not make: every claim and election node
// a sweeper makes is ephemeral with the credentials' ACL, so any other child
// was made while dir admitted others, possibly by an attacker: a forged claim
// holds its crossing for as long as it lives (a lost alert), a forged election
// node may win every election (no sweeps). It cannot be told from the node of
// a replica without credentials still running during the upgrade to them;
// deleting that one costs at most one duplicate send of a delivery in flight
// (and such a replica can no longer claim anyway), keeping a forgery costs
// alerts, so it is deleted, with a warning for each. Deleting needs DELETE on
// dir only, which own gave; a child that still cannot be deleted (it has
// children of another identity) fails the start.
func (k *KeeperClaims) dropForeign(dir string) error {
	kids, _, err := k.conn.Children(dir)
	if err != nil {
		return fmt.Errorf("keeper: list %s: %w", dir, err)
	}
	for _, kid := range kids {
		p := path.Join(dir, kid)
		acl, st, err := k.conn.GetACL(p)
		readable := true
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case errors.Is(err, zk.ErrNoAuth):
			readable = false
		case err != nil:
			return fmt.Errorf("keeper: read the ACL of %s: %w", p, err)
		case st.EphemeralOwner != 0 && k.sole(acl):
			continue // a sweeper's, maybe another replica's
		}
		shown := "unreadable to the configured user"
		if readable {
			shown = k.formatACL(acl)
		}
		if err := k.deleteTree(p); err != nil {
			return fmt.Errorf("keeper: %s (ACL %s) was not made by a sweeper with the configured credentials and may be forged, and it cannot be deleted (%w); %s",
				p, shown, err, k.remedy(p))
		}
		attrs := []any{"path", p, "acl", shown}
		if readable {
			attrs = append(attrs, "ephemeral_owner", fmt.Sprintf("%#x", st.EphemeralOwner), "created", time.UnixMilli(st.Ctime).UTC())
		}
		k.log.Warn("keeper: deleted a node not made by a sweeper with the configured credentials: it may have been forged by someone the node above admitted", attrs...)
	}
	return nil
}

// deleteTree deletes p and whatever is under it.
func (k *KeeperClaims) deleteTree(p string) error {
	err := k.conn.Delete(p, -1)
	if errors.Is(err, zk.ErrNotEmpty) {
		kids, _, lerr := k.conn.Children(p)
		if lerr != nil {
			return lerr
		}
		for _, kid := range kids {
			if err := k.deleteTree(path.Join(p, kid)); err != nil {
				return err
			}
		}
		err = k.conn.Delete(p, -1)
	}
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return err
}

// sole reports whether acl admits the configured user alone, with every
// permission. Entries granting nothing are allowed.
func (k *KeeperClaims) sole(acl []zk.ACL) bool {
	var mine int32
	for _, a := range acl {
		switch {
		case k.mine(a):
			mine |= a.Perms
		case a.Perms != 0:
			return false
		}
	}
	return mine == zk.PermAll
}

func (k *KeeperClaims) mine(a zk.ACL) bool {
	return a.Scheme == k.acl[0].Scheme && a.ID == k.acl[0].ID
}

// fault says what is wrong with an ACL that sole refuses.
func (k *KeeperClaims) fault(acl []zk.ACL) string {
	for _, a := range acl {
		if !k.mine(a) && a.Perms != 0 {
			return "admits others than the configured user"
		}
	}
	return "does not give the configured user every permission"
}

// remedy is the operator's way out when the sweeper cannot fix p itself.
func (k *KeeperClaims) remedy(p string) string {
	return fmt.Sprintf("check who made it, then delete it (zkCli: deleteall %s, as the identity its ACL admits or as ZooKeeper's superuser) and start the sweeper again, which creates what it needs with the ACL of %s alone", p, k.user)
}

// formatACL shows an ACL as scheme:id:perms entries. A digest is shown by
// its user name alone: the hash is a password's SHA-1, not for logs.
func (k *KeeperClaims) formatACL(acl []zk.ACL) string {
	if len(acl) == 0 {
		return "(empty)"
	}
	parts := make([]string, 0, len(acl))
	for _, a := range acl {
		id := a.ID
		if a.Scheme == "digest" {
			user, _, _ := strings.Cut(a.ID, ":")
			id = user
			if user == k.user && !k.mine(a) {
				id += "(another password)"
			}
		}
		perms := ""
		for _, p := range []struct {
			bit int32
			c   string
		}{{zk.PermCreate, "c"}, {zk.PermDelete, "d"}, {zk.PermRead, "r"}, {zk.PermWrite, "w"}, {zk.PermAdmin, "a"}} {
			if a.Perms&p.bit != 0 {
				perms += p.c
			}
		}
		if perms == "" {
			perms = "none"
		}
		parts = append(parts, a.Scheme+":"+id+":"+perms)
	}
	return strings.Join(parts, ",")
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
	// No Expires: the claim lasts as long as this session, which the
	// client's heartbeats keep alive however long a send takes.
	return Claim{Token: uint64(st.Czxid)}, true, nil
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

// Release implements Claimer: it deletes the node only if this claim created
// it, known by two marks that must both hold.
//
// The creation zxid alone identifies the node within one ensemble's history:
// every transaction has its own zxid, and a claim is a create of its own (no
// multi), so no other node ever has the claim's czxid. But zxids are not
// unique across histories: an ensemble whose data was lost and started empty
// (or another ensemble behind the same address) numbers its transactions
// from the start again, and a node another replica creates there can carry
// the czxid of a claim taken before; Release of that old claim then deleted
// the other replica's live claim (a third replica may claim and send again).
// So the node must also belong to this replica's current session: a node of
// another session is never this claim, and a claim whose session ended has no
// node left to release (it was ephemeral).
//
// What neither mark covers: the delete is conditional on the node's version,
// which is 0 for every claim node, so a node that replaces this claim's
// between the Get and the Delete (this session expiring in that gap, during
// a partition, and another replica claiming) would be deleted. ZooKeeper has
// no conditional delete on the owner or czxid; closing that gap needs a
// multi that also checks a node only this session holds.
func (k *KeeperClaims) Release(_ context.Context, key string, c Claim) error {
	p := path.Join(k.claimsPath(), key)
	_, st, err := k.conn.Get(p)
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return fmt.Errorf("keeper release %s: %w", key, err)
	}
	if uint64(st.Czxid) != c.Token || st.EphemeralOwner != k.conn.SessionID() {
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
