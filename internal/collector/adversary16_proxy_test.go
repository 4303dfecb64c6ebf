package collector_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// holdProxy forwards TCP connections to a ClickHouse server, as a network
// would. When a client sends a query containing trigger, the next bytes
// that client sends on that connection (the insert's data block, sent once
// the server has answered with the table's header) are handed to onData
// before being forwarded: the test decides what happens to the server
// meanwhile (here: wait for the other replica, then SIGSTOP the server, so
// the data sits in its socket until it is thawed). It fires once.
type holdProxy struct {
	ln     net.Listener
	target string
	// arm says whether a chunk a client sent (a query) arms the hold.
	arm    func(chunk []byte) bool
	onData func()

	// multi: every chunk arm says yes to arms a hold, not the first only.
	multi bool
	// refuse: connections are accepted and closed at once (the server
	// cannot be reached).
	refuse atomic.Bool

	mu    sync.Mutex
	fired bool
	conns []net.Conn
}

func newHoldProxy(t *testing.T, target, trigger string, onData func()) *holdProxy {
	return newArmedProxy(t, target, func(chunk []byte) bool { return bytes.Contains(chunk, []byte(trigger)) }, onData)
}

// newArmedProxy is newHoldProxy with the decision made by arm, called under
// the proxy's lock for each chunk a client sends until it says yes.
func newArmedProxy(t *testing.T, target string, arm func(chunk []byte) bool, onData func()) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, target: target, arm: arm, onData: onData}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *holdProxy) Addr() string { return p.ln.Addr().String() }

func (p *holdProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *holdProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		go func() {
			// Server to client as it comes; the upstream connection stays
			// open after the client leaves (the server may still read
			// what it was sent, as over a slow network).
			io.Copy(c, up)
			c.Close()
		}()
		go p.clientToServer(c, up)
	}
}

func (p *holdProxy) clientToServer(c, up net.Conn) {
	buf := make([]byte, 64<<10)
	armed := false
	var tail []byte // the end of the previous chunk: a query may straddle two reads
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if armed {
				armed = false
				p.onData()
			}
			seen := append(append([]byte{}, tail...), chunk...)
			tail = append(tail[:0], chunk[max(0, len(chunk)-128):]...)
			p.mu.Lock()
			if (!p.fired || p.multi) && p.arm(seen) {
				p.fired, armed = true, true
				tail = tail[:0]
			}
			p.mu.Unlock()
			if _, werr := up.Write(chunk); werr != nil {
				return
			}
		}
		if err != nil {
			// The client gave up: let the server read to the end of what
			// it was sent, as a half-closed TCP connection does.
			if tc, ok := up.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}
