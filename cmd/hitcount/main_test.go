package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hitcount/hitcount/internal/backend"
	"github.com/hitcount/hitcount/internal/embedded"
	"github.com/hitcount/hitcount/internal/loggen"
	"github.com/hitcount/hitcount/internal/queryhttp"
	"github.com/hitcount/hitcount/internal/testenv"
	"github.com/hitcount/hitcount/parser"
	"github.com/hitcount/hitcount/sink"
)

// Child mode: hold an embedded data directory open, as a running standalone
// process does, until stdin closes.
func TestMain(m *testing.M) {
	if args := os.Getenv("HITCOUNT_RUN_ARGS"); args != "" {
		// Child mode: the command itself, until SIGTERM.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		code := run(ctx, strings.Fields(args), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	if dir := os.Getenv("HITCOUNT_HOLD_DIR"); dir != "" {
		st, err := embedded.Open(context.Background(), embedded.Options{LibPath: testenv.ChdbLibPath(), DataPath: dir, Database: "hitcount"})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println("holding")
		bufio.NewReader(os.Stdin).ReadString('\n')
		st.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestUsage(t *testing.T) {
	cases := []struct {
		args []string
		code int
		out  string
	}{
		{nil, 2, "hitcount run -config FILE"},
		{[]string{"serve"}, 2, `unknown command "serve"`},
		{[]string{"run"}, 2, "give -config FILE"},
		{[]string{"run", "-check-config", "-config", "../../config/testdata/mistakes.yaml"}, 1, "rules[0].timezone: unknown time zone"},
		{[]string{"query", "-config", "x.yaml", "-format", "xml", "SELECT 1"}, 2, "want one of [table csv tsv json]"},
		{[]string{"query", "-config", "x.yaml"}, 2, "no SQL given"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, strings.NewReader(""), &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.out) {
			t.Errorf("%v: exit %d, output %q; want exit %d with %q", c.args, code, stdout.String()+stderr.String(), c.code, c.out)
		}
	}
}

// configFor writes a configuration naming the database d.
func configFor(t *testing.T, d *testenv.Database) string {
	t.Helper()
	store := "embedded: {path: " + d.Data + ", library: " + testenv.ChdbLibPath() + "}"
	if d.Backend == "server" {
		store = fmt.Sprintf("clickhouse: {addr: [%s], database: %s}", d.Addr, d.Name)
	}
	path := filepath.Join(t.TempDir(), "hitcount.yaml")
	cfg := store + "\nsources: [{path: /nonexistent/access.log, site: www}]\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The query command answers SQL from either store in each output format, and
// reports the engine's own message for a bad statement.
func TestQuery(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, d *testenv.Database) {
		if d.Backend == "embedded" {
			d.Name = "hitcount" // the embedded store's database
		}
		st := d.Open(t)
		b := sink.NewBatch(3)
		b.Reset("www", 1)
		for i, p := range []string{"/a", "/b", "/a"} {
			h := parser.Hit{Unix: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).Unix(), Method: []byte("GET"), Path: []byte(p), Status: 200}
			b.Add(&h, int64(i*10), int64(i*10+10))
		}
		if err := st.Insert(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		st.Close()
		cfg := configFor(t, d)
		sql := "SELECT path, count() AS n FROM " + d.Name + ".hits GROUP BY path ORDER BY path"
		for _, c := range []struct{ format, want string }{
			{"table", "path  n\n----  -\n/a    2\n/b    1\n(2 rows)\n"},
			{"csv", "path,n\n/a,2\n/b,1\n"},
			{"json", `{"path":"/a","n":2}` + "\n" + `{"path":"/b","n":1}` + "\n"},
		} {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"query", "-config", cfg, "-format", c.format, sql}, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("%s: exit %d: %s", c.format, code, stderr.String())
			}
			if stdout.String() != c.want {
				t.Errorf("%s: got\n%s\nwant\n%s", c.format, stdout.String(), c.want)
			}
		}
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"query", "-config", cfg}, strings.NewReader("SELEKT 1;\n"), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "Syntax error") {
			t.Errorf("bad SQL from stdin: exit %d, %q", code, stderr.String())
		}
	})
}

// A second process on a running standalone job's data directory is refused
// with a message that says why and what to do.
func TestDataDirInUse(t *testing.T) {
	testenv.RequireChdb(t)
	dir := filepath.Join(t.TempDir(), "data")
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), "HITCOUNT_HOLD_DIR="+dir)
	stdin, _ := holder.StdinPipe()
	out, _ := holder.StdoutPipe()
	holder.Stderr = os.Stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "holding\n" {
		t.Fatalf("holder: %q %v", line, err)
	}
	cfg := configFor(t, &testenv.Database{Backend: "embedded", Data: dir})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"query", "-config", cfg, "SELECT 1"}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "one process per directory") || !strings.Contains(stderr.String(), dir) {
		t.Errorf("exit %d, %q; want a refusal naming the directory", code, stderr.String())
	}
}

// The move from the embedded store to a server (docs/operations.md), as its commands
// are written: export hits with the query command as TSV; create the schema
// on the server with `collector -migrate` and the new config (the old one
// plus a clickhouse section), since loading into a server that has none
// fails (Code: 81, database hitcount doesn't exist: issue 18); load the
// file with clickhouse-client. The server's rollups and committed offsets
// then match the embedded store's, so a collector pointed at the server
// resumes where the embedded one stopped.
func TestMoveToServer(t *testing.T) {
	testenv.Require(t, "clickhouse-client", "/usr/bin/clickhouse-client")
	emb := testenv.NewDatabase(t, "embedded")
	emb.Name = "hitcount"
	st := emb.Open(t)
	b := sink.NewBatch(1000)
	b.Reset("www", 42)
	for i := range 1000 {
		h := parser.Hit{Unix: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).Unix() + int64(i), Method: []byte("GET"),
			Path: []byte(fmt.Sprintf("/p%d\twith tab", i%7)), Status: 200, UserAgent: []byte(`ua "quoted" \ back`)}
		b.Add(&h, int64(i*100), int64(i*100+100))
	}
	if err := st.Insert(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	st.Close()
	// 1. Export. INTO OUTFILE: the engine writes the file itself, however
	// many rows.
	file := filepath.Join(t.TempDir(), "hits.tsv")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"query", "-config", configFor(t, emb), "SELECT * FROM hitcount.hits INTO OUTFILE '" + file + "' FORMAT TSVWithNames"},
		strings.NewReader(""), &stdout, &stderr); code != 0 || stdout.Len() != 0 {
		t.Fatalf("export: exit %d, %q %s", code, stdout.String(), stderr.String())
	}
	srv := testenv.NewDatabase(t, "server")
	srv.Name = "hitcount"
	host, port, _ := strings.Cut(srv.Addr, ":")
	load := func() (string, error) {
		export, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer export.Close()
		cmd := exec.Command("clickhouse-client", "--host", host, "--port", port, "--query", "INSERT INTO hitcount.hits FORMAT TSVWithNames")
		cmd.Stdin = export
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Loaded first, as the steps had it before: refused.
	if out, err := load(); err == nil || !strings.Contains(out, "Code: 81") {
		t.Fatalf("load before the schema exists: %v %s; want Code: 81 (the step this test is about)", err, out)
	}
	// 2. The schema, with the collector the new config is for.
	collector := filepath.Join(t.TempDir(), "collector")
	if out, err := exec.Command("go", "build", "-o", collector, "github.com/hitcount/hitcount/cmd/collector").CombinedOutput(); err != nil {
		t.Fatalf("build the collector: %v\n%s", err, out)
	}
	if out, err := exec.Command(collector, "-migrate", "-config", configFor(t, srv)).CombinedOutput(); err != nil {
		t.Fatalf("collector -migrate: %v\n%s", err, out)
	}
	// 3. Load.
	if out, err := load(); err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	q := "SELECT count() AS n, sum(cityHash64(path, user_agent, offset)) AS h, (SELECT sum(hits) FROM hitcount.hits_1m) AS r, (SELECT maxMerge(max_offset) FROM hitcount.ingest_progress) AS o FROM hitcount.hits"
	answers := map[string]string{}
	for _, d := range []*testenv.Database{emb, srv} {
		var out bytes.Buffer
		if code := run(context.Background(), []string{"query", "-config", configFor(t, d), "-format", "tsv", q}, strings.NewReader(""), &out, &stderr); code != 0 {
			t.Fatalf("%s: %s", d.Backend, stderr.String())
		}
		answers[d.Backend] = out.String()
	}
	if answers["server"] != answers["embedded"] || !strings.Contains(answers["server"], "1000\t") {
		t.Fatalf("rows, content hash, rollup, committed offset differ after the move:\nembedded %q\nserver   %q", answers["embedded"], answers["server"])
	}
}

// While `hitcount run` holds the embedded engine in its process, `hitcount
// query` from another process gets its answers from the job's query socket:
// the counts grow as the job ships, and everything a reviewer used to write
// or read files, reach other servers or exhaust memory through it is
// refused, from the command, from a web page and from another local user.
func TestQueryWhileRunning(t *testing.T) {
	testenv.RequireChdb(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	const lines = 20000
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loggen.New(loggen.Options{Seed: 3}).WriteN(f, lines); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`embedded: {path: ./data, library: %s}
sources: [{path: %s, site: www, start_at: beginning}]
http: {listen: %q}
outbox: ./outbox
rules: [{name: r, match: {path: /pricing}, threshold: 1000000, window: 1h, to: [ops@example.com]}]
`, testenv.ChdbLibPath(), logPath, listen)), 0o644)
	job := exec.Command(os.Args[0], "-test.run=^$")
	job.Env = append(os.Environ(), "HITCOUNT_RUN_ARGS=run -config "+cfg)
	job.Stderr = os.Stderr
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		job.Process.Signal(syscall.SIGTERM)
		if err := job.Wait(); err != nil {
			t.Errorf("the job after SIGTERM: %v", err)
		}
	}()
	// Query only once the job serves: the first to open the engine keeps it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + listen + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job does not serve %s: %v", listen, err)
		}
	}
	query := func(sql string) (string, string, int) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"query", "-config", cfg, "-format", "tsv", sql}, strings.NewReader(""), &stdout, &stderr)
		return stdout.String(), stderr.String(), code
	}
	want := fmt.Sprintf("n\n%d\n", lines)
	var out, errOut string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var code int
		out, errOut, code = query("SELECT count() AS n FROM hitcount.hits")
		if code == 0 && out == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the running job never answered %q (last: %q, %q)", want, out, errOut)
		}
	}
	target := filepath.Join(dir, "bashrc")
	for _, c := range []struct{ sql, why string }{
		{"INSERT INTO hitcount.sweeps (owner) VALUES ('x')", "refused"},
		{"SET readonly = 0", "refused"},
		{"DROP TABLE hitcount.hits", "refused"},
		{"SELECT 1 INTO OUTFILE '" + target + "'", "refused"},
		{"SELECT 'echo pwned' INTO/**/OUTFILE '" + target + "' APPEND", "refused"},
		{"SELECT 'echo pwned' INTO -- x\nOUTFILE '" + target + "' TRUNCATE", "refused"},
		{"SELECT 1; SELECT 2 INTO OUTFILE '" + target + "'", "multi-statements"},
		{"SELECT file('/etc/passwd')", "function file"},
		{"SELECT * FROM file('/proc/self/environ', RawBLOB)", "function file"},
		{"SELECT * FROM url('http://127.0.0.1:1/', CSV, 'a String')", "function url"},
		// The session's memory cap: this needs 800 MB.
		{"SELECT length(groupArray(number)) FROM numbers(100000000)", "memory"},
		// Found by an adversarial review of the first version.
		{"SELECT * APPLY(file) FROM (SELECT '/etc/passwd' AS p)", "APPLY"},
		{"SELECT y FROM values('p String, y String ALIAS file(p)', '/etc/passwd')", "function values"},
		// Refused by the engine's memory cap or, past it, by the result caps.
		{"SELECT " + strings.Repeat("'' AS c, ", 199) + "'' AS c200 FROM numbers(1000000)", "result too large|memory limit"},
		{"SELECT CAST(1, 'Enum8(''" + strings.Repeat("a", 500) + "'' = 1)') FROM numbers(1000000)", "result too large|memory limit"},
	} {
		out, errOut, code := query(c.sql)
		said := false
		for _, why := range strings.Split(c.why, "|") {
			said = said || strings.Contains(strings.ToLower(errOut), strings.ToLower(why))
		}
		if code != 1 || !said || strings.Contains(out, "root:") {
			t.Errorf("%s: exit %d, %q %q; want it refused (%s)", c.sql, code, out, errOut, c.why)
		}
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("INTO OUTFILE wrote a file")
	}
	// A web page the operator visits posts text/plain cross-origin (no
	// preflight) to the ops port: nothing there runs SQL.
	req, _ := http.NewRequest(http.MethodPost, "http://"+listen+"/query", strings.NewReader("SELECT 1 INTO OUTFILE '"+target+"'"))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "http://attacker.example")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("cross-origin POST /query on the ops port: %d %q; want 404 (not served on TCP)", resp.StatusCode, body)
		}
	}
	// On the socket itself: a request with an Origin, or for another Host
	// (a rebound name), is refused.
	sock := queryhttp.SocketPath(filepath.Join(dir, "state"))
	onSocket := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	for _, h := range []struct{ url, origin string }{
		{"http://localhost/query", "http://attacker.example"},
		{"http://attacker.example/query", ""},
	} {
		req, _ := http.NewRequest(http.MethodPost, h.url, strings.NewReader("SELECT 1"))
		req.Header.Set("Content-Type", "text/plain")
		if h.origin != "" {
			req.Header.Set("Origin", h.origin)
		}
		resp, err := onSocket.Do(req)
		if err != nil {
			t.Fatalf("socket: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with Origin %q on the socket: %d; want 403", h.url, h.origin, resp.StatusCode)
		}
	}
	// Another local user cannot use it: not through the directory (0700),
	// and not even when the modes are loosened (the peer's uid is checked).
	if os.Geteuid() == 0 {
		asNobody := func() string {
			cmd := exec.Command("/usr/bin/python3", "-c", `import socket,sys
s=socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print("connect:", e.strerror); sys.exit(0)
try:
    s.sendall(b"POST /query HTTP/1.0\r\nHost: localhost\r\nContent-Length: 8\r\n\r\nSELECT 1")
    print("answer:", s.recv(4096).decode(errors="replace"))
except OSError as e:
    print("answer:", e.strerror)`, sock)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("python3 as nobody: %v: %s", err, out)
			}
			return string(out)
		}
		// nobody must be able to reach the directory's parent for the
		// first case to test the socket directory's own mode.
		for p := filepath.Dir(filepath.Dir(sock)); p != "/"; p = filepath.Dir(p) {
			os.Chmod(p, 0o755)
		}
		out := asNobody()
		t.Logf("another user on the socket: %s", out)
		if !strings.Contains(out, "connect: Permission denied") {
			t.Errorf("another user on the socket: %q; want permission denied", out)
		}
		os.Chmod(filepath.Dir(sock), 0o755)
		os.Chmod(sock, 0o666)
		out = asNobody()
		t.Logf("another user on a loosened socket: %s", out)
		if !strings.HasPrefix(out, "answer:") || strings.Contains(out, "HTTP/") {
			t.Errorf("another user on a loosened socket: %q; want the connection closed unanswered", out)
		}
	}
}

// `hitcount run -check-config` says what is allowed but exposed, as the
// collector and the sweeper do.
func TestCheckConfigWarns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hitcount.yaml")
	yaml := `clickhouse: {addr: [clickhouse:9000], username: hitcount, password_env: CH_PW}
sources: [{path: /var/log/nginx/access.log, site: www}]
outbox: ./outbox
rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"run", "-check-config", "-config", path}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	want := "warning: " + path + ":1:21: clickhouse.addr[0]: \"clickhouse:9000\" is not a loopback address and clickhouse.tls is off"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q, want %q", stderr.String(), want)
	}
}

// `hitcount run -check-config` refuses a rule's template that fails when
// executed, at its place in the file, as the sweeper does.
func TestCheckConfigRefusesFailingTemplate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hitcount.yaml")
	yaml := `sources: [{path: /var/log/nginx/access.log, site: www}]
rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c], text: '{{index .Series 3}}'}]
`
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "-check-config", "-config", path}, strings.NewReader(""), &stdout, &stderr)
	want := path + ":2:82: rules[0].text: rule a: fails on a sample crossing (window 1h, series of one step, path /pricing): "
	if code != 1 || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "index out of range: 3") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 with %q", code, stdout.String(), stderr.String(), want)
	}
}

// A taken http.listen port fails `hitcount run` before the embedded engine
// opens (its directory is not even created) or the demo traffic starts,
// naming the key and its place in the file.
func TestPortInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "hitcount.yaml")
	yaml := fmt.Sprintf(`embedded: {path: ./chdb}
sources: [{path: ./demo/access.log, site: demo}]
http: {listen: %q}
rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]
`, taken.Addr())
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"run", "-config", path, "-demo", filepath.Join(dir, "demo", "access.log")}, strings.NewReader(""), &stdout, &stderr)
	want := fmt.Sprintf("hitcount run: %s:3:16: http.listen: %s is in use by another process", path, taken.Addr())
	if code != 1 || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want exit 1 with %q", code, stderr.String(), want)
	}
	for _, p := range []string{"chdb", "demo"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s exists: started before the port was checked", p)
		}
	}
}

// `hitcount run` on a server that refuses its login exits at once with 78
// and the reason, as the collector and the sweeper do.
func TestLoginRefusedAtStart(t *testing.T) {
	ch := testenv.ClickHouse(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`clickhouse: {addr: [%q], database: runtest, username: nobody}
sources: [{path: access.log, site: www}]
http: {listen: ""}
rules: [{name: a, match: {path: /}, threshold: 1, window: 1h, to: [a@b.c]}]
`, ch.Addr())), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"run", "-config", cfg}, strings.NewReader(""), &stdout, &stderr)
	want := fmt.Sprintf(`hitcount run: clickhouse at [%s] refused the login of user "nobody" (UNKNOWN_USER, code 192: Unknown user nobody): check clickhouse.username (nobody), with no password (clickhouse.password_env or password_file gives one), in %s`, ch.Addr(), cfg)
	if code != backend.ExitLoginRefused || !strings.Contains(stderr.String(), want) {
		t.Errorf("exit %d, stderr %q; want exit %d with %q", code, stderr.String(), backend.ExitLoginRefused, want)
	}
}

// The live view of `hitcount run` counts every rejected line, not the
// sample the rejects table keeps (at most 100 per batch): 400 bad lines in
// one batch show as 400, with 100 sampled.
func TestLiveViewCountsEveryRejectedLine(t *testing.T) {
	testenv.RequireChdb(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loggen.New(loggen.Options{Seed: 8, BadEvery: 50}).WriteN(f, 20000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cfg := filepath.Join(dir, "hitcount.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`embedded: {path: ./data, library: %s}
sources: [{path: %s, site: www, start_at: beginning}]
batch: {rows: 50000, delay: 200ms}
http: {listen: ""}
outbox: ./outbox
rules: [{name: r, match: {path: /pricing}, threshold: 1000000, window: 1h, to: [ops@example.com]}]
`, testenv.ChdbLibPath(), logPath)), 0o644)
	job := exec.Command(os.Args[0], "-test.run=^$")
	job.Env = append(os.Environ(), "HITCOUNT_RUN_ARGS=run -config "+cfg+" -live 500ms")
	out, err := job.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	job.Stderr = os.Stderr
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		job.Process.Signal(syscall.SIGTERM)
		job.Wait()
	}()
	// Every line once the file is shipped: 400 rejected, however many
	// batches (each keeps at most 100 samples) the reader cut.
	want := regexp.MustCompile(`hits 19600( \(\d+/s\))?, rejected lines 400 since start \((\d+) sampled in hitcount\.rejects\)`)
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	var last string
	for deadline := time.After(90 * time.Second); ; {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the job ended; last view line %q", last)
			}
			if strings.Contains(line, "rejected lines") {
				last = line
			}
			if m := want.FindStringSubmatch(line); m != nil {
				if n, _ := strconv.Atoi(m[2]); n >= 400 {
					t.Fatalf("%q: the sample is the whole count; the test did not cut batches as it meant to", line)
				}
				t.Logf("live view: %s", line)
				return
			}
		case <-deadline:
			t.Fatalf("no live view matching %s within 90 s; last: %q", want, last)
		}
	}
}
