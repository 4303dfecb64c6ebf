// Package docs holds no Go code: only the tests of README.md, the pages in
// docs/ and deploy/README.md. Each check reads the pages as GitHub shows them
// and holds what they say against the real thing: links and anchors against
// the files, config examples against the config loader, commands and flags
// against the built binaries, SQL against the embedded engine's real schema,
// and the reference tables against the code they describe.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// page is one Markdown file, its path relative to the repository root.
type page struct {
	path string
	text string
}

// repoRoot is the repository root: the parent of this package's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(wd)
}

// pages reads README.md, every docs/*.md and deploy/README.md.
func pages(t *testing.T) []page {
	t.Helper()
	root := repoRoot(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	var out []page
	for _, p := range append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "deploy", "README.md")}, docs...) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, page{path: filepath.ToSlash(rel), text: string(data)})
	}
	return out
}

// pageNamed returns the page at path (relative to the root).
func pageNamed(t *testing.T, path string) page {
	t.Helper()
	for _, p := range pages(t) {
		if p.path == path {
			return p
		}
	}
	t.Fatalf("no page %s", path)
	return page{}
}

// block is a fenced code block: its info string (the language and what
// follows it), its first line's number and its content, unindented as far
// as its fence was indented (a block inside a list item).
type block struct {
	info string
	line int
	body string
}

// lang is the block's language: the first word of its info string.
func (b block) lang() string {
	f := strings.Fields(b.info)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

var fence = regexp.MustCompile("^( *)```(.*)$")

// split returns a page's fenced blocks and its prose: the text outside the
// blocks, line for line (a block's lines are blank in it, so line numbers
// still hold).
func split(text string) (blocks []block, prose string) {
	lines := strings.Split(text, "\n")
	var out []string
	var cur *block
	indent := ""
	var body []string
	for i, l := range lines {
		if cur == nil {
			if m := fence.FindStringSubmatch(l); m != nil {
				cur = &block{info: strings.TrimSpace(m[2]), line: i + 1}
				indent, body = m[1], nil
				out = append(out, "")
				continue
			}
			out = append(out, l)
			continue
		}
		if strings.TrimSpace(l) == "```" {
			cur.body = strings.Join(body, "\n")
			if len(body) > 0 {
				cur.body += "\n"
			}
			blocks = append(blocks, *cur)
			cur = nil
			out = append(out, "")
			continue
		}
		body = append(body, strings.TrimPrefix(l, indent))
		out = append(out, "")
	}
	return blocks, strings.Join(out, "\n")
}

var (
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*$`)
	mdLink     = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// headings returns the anchors GitHub gives a page's headings.
func headings(text string) map[string]bool {
	_, prose := split(text)
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range strings.Split(prose, "\n") {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			anchors[s+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[s] = true
		}
		seen[s]++
	}
	return anchors
}

// slug is GitHub's anchor for a heading: lower case, letters, digits, "-"
// and "_" kept, spaces made "-", everything else (backticks, dots, colons,
// parentheses) dropped.
func slug(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestLinks checks that every relative link of README.md, docs/*.md and
// deploy/README.md names a file or directory that exists and, with an
// anchor, a heading of that page; and that every page in docs/ is linked
// from the README.
func TestLinks(t *testing.T) {
	root := repoRoot(t)
	all := pages(t)
	anchors := map[string]map[string]bool{}
	for _, p := range all {
		anchors[p.path] = headings(p.text)
	}
	fromReadme := map[string]bool{}
	checked := 0
	for _, p := range all {
		_, prose := split(p.text)
		for n, l := range strings.Split(prose, "\n") {
			for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(l, "``"), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, anchor, _ := strings.Cut(target, "#")
				dest := p.path
				if file != "" {
					dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(p.path), file)))
				}
				where := p.path + ":" + strconv.Itoa(n+1)
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					t.Errorf("%s: link %s: %s does not exist", where, target, dest)
					continue
				}
				if p.path == "README.md" {
					fromReadme[dest] = true
				}
				if anchor == "" {
					continue
				}
				a, ok := anchors[dest]
				if !ok {
					data, err := os.ReadFile(filepath.Join(root, dest))
					if err != nil || !strings.HasSuffix(dest, ".md") {
						t.Errorf("%s: link %s: an anchor into %s, which is not a Markdown page", where, target, dest)
						continue
					}
					a = headings(string(data))
					anchors[dest] = a
				}
				if !a[anchor] {
					t.Errorf("%s: link %s: %s has no heading #%s", where, target, dest, anchor)
				}
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links found; the link pattern no longer matches the pages", checked)
	}
	for _, p := range all {
		if strings.HasPrefix(p.path, "docs/") && !fromReadme[p.path] {
			t.Errorf("%s is not linked from README.md", p.path)
		}
	}
}

// TestSlug pins the heading anchors GitHub makes, which the links rely on.
func TestSlug(t *testing.T) {
	for _, c := range []struct{ heading, want string }{
		{"Quorum inserts (`clickhouse.insert_quorum`)", "quorum-inserts-clickhouseinsert_quorum"},
		{"`sources` (list; the collector needs at least one)", "sources-list-the-collector-needs-at-least-one"},
		{"`scripts/run.sh`", "scriptsrunsh"},
		{"Reset a rule's state", "reset-a-rules-state"},
		{"Use it on your own nginx/Apache log", "use-it-on-your-own-nginxapache-log"},
	} {
		if got := slug(c.heading); got != c.want {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.want)
		}
	}
	a := headings("# A\n## How it is tested\n```sh\n# not a heading\n```\n## How it is tested\n")
	for _, want := range []string{"a", "how-it-is-tested", "how-it-is-tested-1"} {
		if !a[want] {
			t.Errorf("headings: no %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("headings: a comment in a code block taken for a heading")
	}
}
