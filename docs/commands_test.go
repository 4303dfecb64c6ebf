package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// flagSets builds the four commands and reads the flags each prints for
// -h: "collector", "sweeper", "loggen", "hitcount run", "hitcount query".
func flagSets(t *testing.T) map[string]map[string]bool {
	t.Helper()
	root := repoRoot(t)
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/collector", "./cmd/sweeper", "./cmd/hitcount", "./cmd/loggen")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	flagLine := regexp.MustCompile(`(?m)^\s+-([a-z][a-z-]*)`)
	sets := map[string]map[string]bool{}
	for name, args := range map[string][]string{
		"collector":      {"collector", "-h"},
		"sweeper":        {"sweeper", "-h"},
		"loggen":         {"loggen", "-h"},
		"hitcount run":   {"hitcount", "run", "-h"},
		"hitcount query": {"hitcount", "query", "-h"},
	} {
		// -h prints the flags and exits 0 or 2, depending on the
		// command's flag set; the output is what counts.
		out, _ := exec.Command(filepath.Join(bin, args[0]), args[1:]...).CombinedOutput()
		set := map[string]bool{}
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			set[m[1]] = true
		}
		if len(set) == 0 {
			t.Fatalf("%s -h printed no flags:\n%s", name, out)
		}
		sets[name] = set
	}
	return sets
}

// word is a shell word and whether it was quoted.
type word struct {
	text   string
	quoted bool
}

// command is one simple command of a shell line: its words, without
// assignments in front, and the files it reads with "<".
type command struct {
	words  []word
	inputs []string
}

var shellKeywords = map[string]bool{"while": true, "until": true, "do": true, "done": true, "if": true, "then": true, "else": true, "fi": true, "!": true}

// shellCommands splits a sh block into simple commands: it joins
// continuation lines, drops comments, splits on | || && ; & and drops
// redirections (keeping the files read with "<"). Quotes are honoured;
// $(...) stays inside its word.
func shellCommands(body string) []command {
	var out []command
	var cur command
	var w strings.Builder
	inWord, quoted, redirect := false, false, ""
	endWord := func() {
		if !inWord {
			return
		}
		text := w.String()
		w.Reset()
		inWord = false
		switch {
		case redirect == "<":
			cur.inputs = append(cur.inputs, text)
		case redirect != "":
		case len(cur.words) == 0 && !quoted && regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`).MatchString(text):
			// VAR=value before the command
		case len(cur.words) == 0 && !quoted && shellKeywords[text]:
		default:
			cur.words = append(cur.words, word{text, quoted})
		}
		redirect, quoted = "", false
	}
	endCommand := func() {
		endWord()
		if len(cur.words) > 0 && cur.words[0].text != "for" {
			out = append(out, cur)
		}
		cur = command{}
	}
	body = strings.ReplaceAll(body, "\\\n", " ")
	rs := []rune(body)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\'' || r == '"':
			j := i + 1
			for j < len(rs) && rs[j] != r {
				if r == '"' && rs[j] == '\\' {
					j++
				}
				j++
			}
			w.WriteString(string(rs[i+1 : min(j, len(rs))]))
			inWord, quoted, i = true, true, j
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(':
			depth, j := 0, i+1
			for ; j < len(rs); j++ {
				if rs[j] == '(' {
					depth++
				} else if rs[j] == ')' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			w.WriteString(string(rs[i:min(j+1, len(rs))]))
			inWord, i = true, j
		case r == '#' && !inWord:
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			endCommand()
		case r == '\n':
			// A line ending in | or && goes on.
			endWord()
			if len(cur.words) > 0 {
				endCommand()
			}
		case r == '|' || r == '&' || r == ';':
			endCommand()
			if i+1 < len(rs) && (rs[i+1] == '|' || rs[i+1] == '&') {
				i++
			}
		case r == '<' || r == '>':
			endWord()
			redirect = string(r)
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
				i++
			}
			// 2>&1: the target is a descriptor, not a file.
			if i+1 < len(rs) && rs[i+1] >= '0' && rs[i+1] <= '9' && strings.HasSuffix(string(rs[max(0, i-1):i+1]), "&") {
				i++
				redirect = ""
			}
		case r == ' ' || r == '\t':
			endWord()
		case r == '\\' && i+1 < len(rs):
			i++
			w.WriteRune(rs[i])
			inWord = true
		default:
			if !inWord && r >= '0' && r <= '9' && i+1 < len(rs) && rs[i+1] == '>' {
				continue // the 2 of 2>
			}
			w.WriteRune(r)
			inWord = true
		}
	}
	endCommand()
	return out
}

// external are the other programs the pages run; a command not here and not
// one of ours fails the test, so a new one is looked at once.
var external = map[string]bool{
	"cd": true, "cp": true, "echo": true, "printf": true, "read": true, "install": true, "useradd": true,
	"chgrp": true, "chmod": true, "systemctl": true, "curl": true, "seq": true, "sudo": true,
	"clickhouse-client": true, "zkCli.sh": true, "docker": true, "docker-compose": true,
}

// topDirs are the repository's directories a path in a command may start
// with (bin/, data/ and outbox/ are made by the commands themselves).
var topDirs = []string{"alerts", "bench", "cmd", "config", "deploy", "docs", "e2e", "internal", "parser", "scripts", "sink"}

// repoPath reports whether s names something in the repository, and the
// path relative to the root.
func repoPath(s string) (string, bool) {
	p := strings.TrimPrefix(s, "./")
	first, _, _ := strings.Cut(p, "/")
	if !slices.Contains(topDirs, first) || !strings.Contains(p, "/") && p != first {
		return "", false
	}
	return p, true
}

// testFuncs lists every Test, Fuzz and Benchmark function of the repository.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	root := repoRoot(t)
	funcs := map[string]bool{}
	re := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == ".cache" || d.Name() == "data") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, "_test.go") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				funcs[m[1]] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return funcs
}

// TestCommands checks every command of the pages' sh blocks and the
// synopses of their text blocks: our binaries are given only flags they
// have, the synopses name every flag each has, scripts exist and know the
// --options given to them, go test names packages and tests that exist,
// and paths into the repository exist.
func TestCommands(t *testing.T) {
	sets := flagSets(t)
	funcs := testFuncs(t)
	root := repoRoot(t)
	inSynopsis := map[string]map[string]bool{}
	n := 0
	for _, p := range pages(t) {
		bs, _ := split(p.text)
		for _, b := range bs {
			where := p.path + ":" + strconv.Itoa(b.line)
			switch b.lang() {
			case "sh":
				for _, c := range shellCommands(b.body) {
					n++
					checkCommand(t, where, c, sets, funcs, root)
				}
			case "text":
				for _, l := range strings.Split(b.body, "\n") {
					name := synopsisName(l)
					if name == "" {
						continue
					}
					if inSynopsis[name] == nil {
						inSynopsis[name] = map[string]bool{}
					}
					for _, f := range synopsisFlags(l) {
						if !sets[name][f] {
							t.Errorf("%s: %s has no flag -%s", where, name, f)
						}
						inSynopsis[name][f] = true
					}
				}
			}
		}
	}
	if n < 40 {
		t.Errorf("%d commands in sh blocks; the block parser lost some", n)
	}
	for name, set := range sets {
		for f := range set {
			if f != "h" && f != "help" && !inSynopsis[name][f] {
				t.Errorf("the synopsis of %s (docs/operations.md, Commands) does not show its flag -%s", name, f)
			}
		}
	}

	// The front page's two commands, exactly.
	bs, _ := split(pageNamed(t, "README.md").text)
	var first []string
	for _, b := range bs {
		if b.lang() == "sh" {
			for _, c := range shellCommands(b.body) {
				var ws []string
				for _, w := range c.words {
					ws = append(ws, w.text)
				}
				first = append(first, strings.Join(ws, " "))
			}
			break
		}
	}
	if want := []string{"./scripts/run.sh [/var/log/nginx/access.log [FORMAT]]", "./scripts/test.sh"}; !slices.Equal(first, want) {
		t.Errorf("README.md's first sh block runs %q, want the two commands %q", first, want)
	}
}

// synopsisName is the command a synopsis line shows ("" for other lines).
func synopsisName(l string) string {
	f := strings.Fields(l)
	if len(f) == 0 || strings.HasPrefix(l, " ") {
		return ""
	}
	switch f[0] {
	case "collector", "sweeper", "loggen":
		return f[0]
	case "hitcount":
		if len(f) > 1 && (f[1] == "run" || f[1] == "query") {
			return "hitcount " + f[1]
		}
	}
	return ""
}

var synopsisFlag = regexp.MustCompile(`(?:^|[\s\[|])-([a-z][a-z-]*)`)

func synopsisFlags(l string) []string {
	var out []string
	for _, m := range synopsisFlag.FindAllStringSubmatch(l, -1) {
		out = append(out, m[1])
	}
	return out
}

func checkCommand(t *testing.T, where string, c command, sets map[string]map[string]bool, funcs map[string]bool, root string) {
	t.Helper()
	name := c.words[0].text
	args := c.words[1:]
	base := filepath.Base(name)
	line := where + ": " + name
	for _, in := range c.inputs {
		if p, ok := repoPath(in); ok {
			if _, err := os.Stat(filepath.Join(root, p)); err != nil {
				t.Errorf("%s: reads %s, which does not exist", line, in)
			}
		}
	}
	// Paths into the repository exist (globs match).
	for _, a := range c.words {
		if a.quoted {
			continue
		}
		if p, ok := repoPath(strings.Trim(a.text, "[]")); ok {
			if m, _ := filepath.Glob(filepath.Join(root, p)); len(m) == 0 {
				t.Errorf("%s: %s does not exist", line, a.text)
			}
		}
	}
	switch {
	case base == "collector" || base == "sweeper" || base == "loggen":
		checkFlags(t, line, args, sets[base])
	case base == "hitcount":
		if len(args) == 0 || sets["hitcount "+args[0].text] == nil {
			t.Errorf("%s: no subcommand run or query", line)
			return
		}
		checkFlags(t, line+" "+args[0].text, args[1:], sets["hitcount "+args[0].text])
	case strings.HasSuffix(name, ".sh") && strings.Contains(name, "/"):
		p, ok := repoPath(name)
		if !ok {
			t.Errorf("%s: a script outside the repository's directories", line)
			return
		}
		info, err := os.Stat(filepath.Join(root, p))
		if err != nil || info.Mode()&0o111 == 0 {
			t.Errorf("%s: not an executable script of the repository (%v)", line, err)
			return
		}
		text, _ := os.ReadFile(filepath.Join(root, p))
		for _, a := range args {
			if o, _, _ := strings.Cut(a.text, "="); strings.HasPrefix(o, "--") && !strings.Contains(string(text), o) {
				t.Errorf("%s: the script knows no %s", line, o)
			}
		}
		checkTestNames(t, line, args, funcs)
	case name == "go":
		if len(args) == 0 || (args[0].text != "test" && args[0].text != "build") {
			t.Errorf("%s: only go test and go build are expected", line)
			return
		}
		checkTestNames(t, line, args, funcs)
	case external[name]:
	default:
		t.Errorf("%s: a command neither of hitcount nor in the list of external programs (docs/commands_test.go)", line)
	}
}

// checkFlags checks the -flags among args (optional ones shown in [...]).
func checkFlags(t *testing.T, line string, args []word, set map[string]bool) {
	t.Helper()
	for _, a := range args {
		if a.quoted {
			continue
		}
		s := strings.TrimLeft(a.text, "[")
		if !strings.HasPrefix(s, "-") || s == "-" {
			continue
		}
		f, _, _ := strings.Cut(strings.TrimLeft(strings.TrimRight(s, "]"), "-"), "=")
		if !set[f] {
			t.Errorf("%s: no flag -%s", line, f)
		}
	}
}

// checkTestNames checks the tests, fuzz targets and benchmarks given to
// -run, -fuzz and -bench by name (XXX and patterns are left alone).
func checkTestNames(t *testing.T, line string, args []word, funcs map[string]bool) {
	t.Helper()
	for i, a := range args[:max(0, len(args)-1)] {
		v := args[i+1].text
		var want string
		switch a.text {
		case "-run":
			want = v
		case "-fuzz":
			want = v
		case "-bench":
			want = "Benchmark" + v
		default:
			continue
		}
		if !regexp.MustCompile(`^(Test|Fuzz|Benchmark)\w+$`).MatchString(want) {
			continue
		}
		if !funcs[want] {
			t.Errorf("%s: %s %s: no function %s in the repository's tests", line, a.text, v, want)
		}
	}
}

// TestShellCommands pins how sh lines are cut into commands.
func TestShellCommands(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string // words of each command, joined by spaces
	}{
		{"collector -config f.yaml   # a comment\n", []string{"collector -config f.yaml"}},
		{"echo \"SELECT ...\" | hitcount query -config h.yaml -format csv   # x | y\n", []string{"echo SELECT ...", "hitcount query -config h.yaml -format csv"}},
		{"clickhouse-client -q \"SELECT 1\" |\n  while read -r p; do zkCli.sh deleteall \"$p\"; done\n", []string{"clickhouse-client -q SELECT 1", "read -r p", "zkCli.sh deleteall $p"}},
		{"CHAOS_SEED=N go test -run X \\\n  ./a/\n", []string{"go test -run X ./a/"}},
		{"for i in $(seq 30); do curl -s localhost:8080/ >/dev/null; done\n", []string{"curl -s localhost:8080/"}},
		{"clickhouse-client --query \"INSERT INTO t FORMAT TSV\" < /tmp/x.tsv 2>&1\n", []string{"clickhouse-client --query INSERT INTO t FORMAT TSV"}},
	} {
		var got []string
		for _, cmd := range shellCommands(c.in) {
			var ws []string
			for _, w := range cmd.words {
				ws = append(ws, w.text)
			}
			got = append(got, strings.Join(ws, " "))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("shellCommands(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

var testName = regexp.MustCompile(`^(?:Test|Fuzz|Benchmark)[A-Z]\w*$`)

// TestReferences checks what the prose names in code spans: repository
// paths exist (globs match), and tests named by their function exist.
func TestReferences(t *testing.T) {
	root := repoRoot(t)
	funcs := testFuncs(t)
	n := 0
	for _, p := range pages(t) {
		_, prose := split(p.text)
		for i, l := range strings.Split(prose, "\n") {
			for _, m := range inlineCode.FindAllString(l, -1) {
				s := strings.Trim(m, "`")
				if strings.ContainsAny(s, " <>") {
					continue
				}
				where := p.path + ":" + strconv.Itoa(i+1)
				if testName.MatchString(s) {
					n++
					if !funcs[s] {
						t.Errorf("%s: no test function %s in the repository", where, s)
					}
					continue
				}
				rel, ok := repoPath(s)
				if !ok {
					continue
				}
				n++
				// A page in deploy/ names files relative to itself.
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil && strings.HasPrefix(p.path, "deploy/") {
					rel = filepath.Join("deploy", rel)
				}
				if m, _ := filepath.Glob(filepath.Join(root, rel)); len(m) == 0 {
					t.Errorf("%s: %s does not exist", where, s)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("%d references checked; the extraction lost some", n)
	}
}
