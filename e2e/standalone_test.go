package e2e

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/testenv"
)

// repoRoot is the directory holding go.mod.
func repoRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// copyRepo copies the source tree as a fresh checkout would have it (no
// bin, data, outbox), so the README's command runs exactly as written
// without touching the developer's own ./data. The library cache is linked,
// as a second run on the same machine would find it.
func copyRepo(t *testing.T, src, dst string) {
	skip := map[string]bool{".git": true, "bin": true, "data": true, "outbox": true, ".cache": true}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if top, _, _ := strings.Cut(rel, string(filepath.Separator)); skip[top] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copy the repository: %v", err)
	}
	cache, err := filepath.EvalSymlinks(filepath.Join(src, ".cache"))
	if err != nil {
		t.Fatalf("no .cache in %s: run scripts/setup.sh first (%v)", src, err)
	}
	if err := os.Symlink(cache, filepath.Join(dst, ".cache")); err != nil {
		t.Fatal(err)
	}
}

// The README's first command, run exactly as written with no argument: it
// sets up the embedded engine, writes live demo traffic, and the first
// crossing's .eml file appears in ./data/demo/outbox within two sweep intervals (30 s
// each) of the traffic starting. Ctrl-C (SIGINT to its process group, as a
// terminal sends it) stops it cleanly; afterwards the store holds every demo
// line once and every sent crossing has its file.
func TestReadmeFirstCommand(t *testing.T) {
	testenv.RequireChdb(t)
	repo := filepath.Join(t.TempDir(), "hitcount")
	copyRepo(t, repoRoot(t), repo)

	cmd := exec.Command("./scripts/run.sh")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "HITCOUNT_HTTP_LISTEN=127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	trafficStarted := make(chan time.Time, 1)
	var logs bytes.Buffer
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logs.WriteString(line + "\n")
			if strings.Contains(line, `msg="writing live demo traffic"`) {
				trafficStarted <- time.Now()
			}
		}
	}()
	go func() { <-logsDone; exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	}()

	var started time.Time
	select {
	case started = <-trafficStarted:
	case err := <-exited:
		t.Fatalf("run.sh exited before the demo started: %v\n%s", err, logs.String())
	case <-time.After(5 * time.Minute): // a cold build and set-up
		t.Fatalf("the demo did not start in 5 min\n%s", logs.String())
	}
	const sweepEvery = 30 * time.Second
	outbox := filepath.Join(repo, "data", "demo", "outbox")
	var first time.Duration
	for deadline := started.Add(2*sweepEvery + 10*time.Second); ; time.Sleep(time.Second) {
		if files, _ := filepath.Glob(filepath.Join(outbox, "*.eml")); len(files) > 0 {
			first = time.Since(started)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no .eml in %s %v after the demo started (two sweep intervals)\n%s", outbox, time.Since(started), logs.String())
		}
	}
	t.Logf("first email %.1f s after the demo traffic started", first.Seconds())
	time.Sleep(3 * time.Second) // a live view at least

	// Ctrl-C.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after Ctrl-C: %v\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after Ctrl-C\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `msg="stopped cleanly"`) {
		t.Errorf("no clean stop in the log:\n%s", logs.String())
	}
	if !strings.Contains(stdout.String(), "/pricing") || !strings.Contains(stdout.String(), "hits ") {
		t.Errorf("no live view of counts on stdout:\n%s", stdout.String())
	}

	// The engine is free now: check the store with the query command.
	query := func(sql string) string {
		q := exec.Command(filepath.Join(repo, "bin", "hitcount"), "query", "-config", filepath.Join(repo, "data", "demo", "hitcount.yaml"), "-format", "tsv", sql)
		out, err := q.Output()
		if err != nil {
			t.Fatalf("query %q: %v", sql, err)
		}
		rows := strings.Split(strings.TrimSpace(string(out)), "\n")
		return rows[len(rows)-1] // the last line under the header
	}
	demo, err := os.Open(filepath.Join(repo, "data", "demo", "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer demo.Close()
	lines := 0
	for sc := bufio.NewScanner(demo); sc.Scan(); {
		lines++
	}
	// The demo wrote until the process stopped, so its last lines may not be
	// stored yet: they are in the log, and the next start ships them.
	want := strings.Repeat("\t"+strconv.Itoa(lines), 3)[1:]
	got := query("SELECT count(), uniqExact(source_id, offset), (SELECT sum(hits) FROM hitcount.hits_1m) FROM hitcount.hits")
	for restart := 0; got != want && restart < 5; restart++ {
		again := exec.Command(filepath.Join(repo, "bin", "hitcount"), "run", "-config", filepath.Join(repo, "data", "demo", "hitcount.yaml"))
		if err := again.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(4 * time.Second)
		again.Process.Signal(syscall.SIGINT)
		if err := again.Wait(); err != nil {
			t.Fatalf("restart: %v", err)
		}
		got = query("SELECT count(), uniqExact(source_id, offset), (SELECT sum(hits) FROM hitcount.hits_1m) FROM hitcount.hits")
	}
	if got != want {
		t.Errorf("rows, distinct (source, offset), rollup = %q; want %d lines each", got, lines)
	}
	emls, _ := filepath.Glob(filepath.Join(outbox, "*.eml"))
	sent := query("SELECT countIf(st = 'sent') FROM (SELECT argMax(state, version) AS st FROM hitcount.crossings GROUP BY key)")
	if sent != strconv.Itoa(len(emls)) {
		t.Errorf("%s crossings sent, %d .eml files", sent, len(emls))
	}
	for _, f := range emls {
		data, _ := os.ReadFile(f)
		if !bytes.Contains(data, []byte("Subject: ")) {
			t.Errorf("%s is not an email:\n%s", f, data)
		}
	}
	t.Logf("%d demo lines stored once each; %d emails for %s crossings sent", lines, len(emls), sent)
}
