package testenv

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	javaBin      = "/usr/bin/java"
	zookeeperJar = "/usr/share/java/zookeeper.jar" // its manifest's Class-Path names the dependencies
)

// ZooKeeperServer is a standalone ZooKeeper 3.8 of the test's own.
// Its methods fail the test that started it (t.Fatal), so call them from
// that test's goroutine.
type ZooKeeperServer struct {
	t    testing.TB
	dir  string
	port int
	proc *process
}

// ZooKeeper starts a standalone server on a free loopback port with its data
// in t.TempDir(), waits until it serves, and stops it when the test ends.
//
// It runs java directly rather than zkServer.sh start-foreground: Debian's
// zkEnv.sh hard-codes ZOO_LOG_DIR=/var/log/zookeeper and turns on JMX, and the
// script adds nothing else but the class path.
func ZooKeeper(t testing.TB) *ZooKeeperServer {
	t.Helper()
	Require(t, "java", javaBin)
	Require(t, "zookeeper", zookeeperJar)
	dir := t.TempDir()
	z := &ZooKeeperServer{t: t, dir: dir, port: freePorts(t, 1)[0]}
	cfg := filepath.Join(dir, "zoo.cfg")
	// tickTime 1000 bounds session timeouts to 2-20 s, so a test waiting for a
	// session to expire waits seconds, not the default 40 s. preAllocSize
	// (KiB) stops each transaction log file from taking 64 MiB of disk.
	conf := fmt.Sprintf(`tickTime=1000
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,cons
maxClientCnxns=0
preAllocSize=1024
`, filepath.Join(dir, "data"), z.port)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatalf("start zookeeper: %v", err)
	}
	z.proc = &process{
		name: "zookeeper",
		path: javaBin,
		args: []string{
			// Parallel tests run several servers: a small heap and the serial
			// collector keep each light (the default heap is a quarter of RAM).
			// Start-up to serving is about 0.3-0.45 s either way.
			"-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-Dzookeeper.log.dir=" + dir,
			"-cp", zookeeperJar,
			"org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg,
		},
		out: filepath.Join(dir, "zookeeper.out"),
	}
	t.Cleanup(func() {
		if err := z.proc.stop(30 * time.Second); err != nil {
			t.Errorf("stop zookeeper: %v", err)
		}
		if t.Failed() {
			t.Logf("zookeeper (%s) output, last lines:\n%s", z.Addr(), fileTail(z.proc.out, 40))
		}
	})
	z.Start()
	return z
}

// Addr is the client address, host:port.
func (z *ZooKeeperServer) Addr() string { return loopback(z.port) }

// PID is the server's process ID (the JVM's).
func (z *ZooKeeperServer) PID() int { return z.proc.pid() }

// Start starts the server (again) on the same data and port and waits until it
// serves requests.
func (z *ZooKeeperServer) Start() {
	z.t.Helper()
	if err := z.proc.start(); err != nil {
		z.t.Fatalf("start zookeeper: %v", err)
	}
	if err := z.waitReady(60 * time.Second); err != nil {
		z.proc.kill()
		z.t.Fatalf("start zookeeper: %v (its output follows at cleanup)", err)
	}
}

// Stop shuts the server down with SIGTERM and waits for it.
func (z *ZooKeeperServer) Stop() {
	z.t.Helper()
	if err := z.proc.stop(30 * time.Second); err != nil {
		z.t.Fatalf("stop zookeeper: %v", err)
	}
}

// Wipe stops the server, deletes its data (snapshots and transaction logs)
// and starts it again, empty, on the same port: an ensemble whose data was
// lost, or another ensemble behind the same address. Its zxids start over.
func (z *ZooKeeperServer) Wipe() {
	z.t.Helper()
	z.Stop()
	if err := os.RemoveAll(filepath.Join(z.dir, "data")); err != nil {
		z.t.Fatalf("wipe zookeeper: %v", err)
	}
	z.Start()
}

// Kill ends the server with SIGKILL.
func (z *ZooKeeperServer) Kill() { z.proc.kill() }

// waitReady polls with the four-letter word srvr: ruok answers imok whether or
// not the server serves yet, srvr reports a Mode only once it does.
func (z *ZooKeeperServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		select {
		case <-z.proc.exited():
			return fmt.Errorf("zookeeper exited during start-up: %v", z.proc.exitErr())
		default:
		}
		out, err := fourLetterWord(z.Addr(), "srvr")
		if err == nil && strings.Contains(out, "Mode: ") {
			return nil
		}
		last = strings.TrimSpace(out)
		if err != nil {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not serving on %s within %v (last answer: %s)", z.Addr(), timeout, last)
}

func fourLetterWord(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	var b strings.Builder
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String(), sc.Err()
}
