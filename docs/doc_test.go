package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// citation is an upstream source, owner/repo@commit:path.
var citation = regexp.MustCompile(`\b[A-Za-z0-9][\w.-]*/[\w.-]+@[0-9a-f]{7,40}:[\w./-]*\w`)

// docPointer is a pointer at one of these pages from anywhere in the project.
// An upstream path such as owner/repo@commit:docs/metrics.md is not one.
var docPointer = regexp.MustCompile(`(?:^|[^\w./:@-])docs/([\w-]+\.md)(#[\w-]+)?`)

// mdLink is a relative Markdown link between these pages: [text](file.md#anchor) or (#anchor).
var mdLink = regexp.MustCompile(`\]\(([\w-]+\.md)?(#[\w-]+)?\)`)

// outside are pointers at files a clone does not have. The patterns are
// assembled so this file does not match them itself.
var outside = []*regexp.Regexp{
	regexp.MustCompile(regexp.QuoteMeta("../" + "shared")),
	regexp.MustCompile(regexp.QuoteMeta("shared/" + "reference")),
	regexp.MustCompile(`(?:^|[^\w./-])` + "reference" + `/[\w-]+\.md`),
	regexp.MustCompile(`(^|[\s"'(=:])` + "/work" + `/`),
}

// researchNote matches the names of notes that exist only outside the
// project, with the directory written before them (group 1).
var researchNote = regexp.MustCompile(`(^|[^\w./-])((?:[\w.-]+/)*)((?:operator|routers|engines|llmd|go-modules-and-test-env|DESIGN|STYLE)\.md)\b`)

// repoRoot is the module root, one level above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// projectFiles lists the files git tracks or would track (untracked but not
// ignored), relative to root; without git, every file outside ignored build
// folders.
func projectFiles(t *testing.T, root string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		var files []string
		for _, f := range strings.Split(string(out), "\x00") {
			if f == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, f)); err == nil { // deleted but not yet staged
				files = append(files, f)
			}
		}
		return files
	}
	t.Log("git ls-files failed; walking the tree instead")
	var files []string
	skip := map[string]bool{".git": true, "artifacts": true, "bin": true, ".cache": true}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			if skip[rel] {
				return filepath.SkipDir
			}
			return nil
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// slug is the anchor GitHub gives a heading: lower case, punctuation other
// than '-' and '_' dropped, spaces turned into '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// section is one heading of a page and the text under it, up to the next heading.
type section struct {
	Level   int
	Heading string
	Line    int
	Body    string
}

// sections splits a Markdown page at its headings, ignoring fenced code.
func sections(text string) []section {
	var out []section
	cur := section{Heading: "(preamble)", Line: 1}
	var body strings.Builder
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if !fenced && level > 0 && level <= 6 && strings.HasPrefix(line[level:], " ") {
			cur.Body = body.String()
			out = append(out, cur)
			cur, body = section{Level: level, Heading: strings.TrimSpace(line[level:]), Line: n}, strings.Builder{}
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	cur.Body = body.String()
	return append(out, cur)
}

// anchors returns a page's heading slugs and any slug that occurs twice.
func anchors(text string) (set map[string]bool, dups []string) {
	set = map[string]bool{}
	for _, s := range sections(text)[1:] {
		a := slug(s.Heading)
		if set[a] {
			dups = append(dups, a)
		}
		set[a] = true
	}
	return set, dups
}

// anchorCache holds each page's anchors, keyed by the page's text: every
// pointer to a page is checked against the same set, and parsing the page
// again per pointer made this package's test take half a minute.
var anchorCache sync.Map

func anchorSet(page string) map[string]bool {
	if set, ok := anchorCache.Load(page); ok {
		return set.(map[string]bool)
	}
	set, _ := anchors(page)
	anchorCache.Store(page, set)
	return set
}

// uncited returns the sections (level 2 and deeper, with text) that carry
// no upstream citation.
func uncited(text string) []section {
	var out []section
	for _, s := range sections(text) {
		if s.Level >= 2 && strings.TrimSpace(s.Body) != "" && !citation.MatchString(s.Body) {
			out = append(out, s)
		}
	}
	return out
}

// pages reads docs/*.md into a map keyed by file name.
func pages(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = string(b)
	}
	return out
}

// pointerProblems checks one file's text: pointers outside the project,
// research-note names not under docs/, and docs/ pointers or links that do
// not resolve against pages. inDocs says the file is one of the pages.
func pointerProblems(name, text string, pages map[string]string, inDocs bool) []string {
	var probs []string
	at := func(off int) int { return 1 + strings.Count(text[:off], "\n") }
	for _, re := range outside {
		for _, m := range re.FindAllStringIndex(text, -1) {
			probs = append(probs, fmt.Sprintf("%s:%d: points outside the project: %q", name, at(m[0]), strings.TrimLeft(text[m[0]:m[1]], " \t\n\"'(=:")))
		}
	}
	for _, m := range researchNote.FindAllStringSubmatchIndex(text, -1) {
		dir, file := text[m[4]:m[5]], text[m[6]:m[7]]
		_, isPage := pages[file]
		switch {
		case isPage && (dir == "docs/" || (dir == "" && inDocs)):
		case dir == "" && !isPage && fileExistsAtRoot(file):
		default:
			probs = append(probs, fmt.Sprintf("%s:%d: %s%s is not a file of this project; cite the docs/ page and section instead", name, at(m[4]), dir, file))
		}
	}
	check := func(off int, file, anchor string) {
		page, ok := pages[file]
		if !ok {
			probs = append(probs, fmt.Sprintf("%s:%d: docs/%s does not exist", name, at(off), file))
			return
		}
		if anchor == "" {
			return
		}
		if !anchorSet(page)[anchor[1:]] {
			probs = append(probs, fmt.Sprintf("%s:%d: docs/%s has no section %s", name, at(off), file, anchor))
		}
	}
	for _, m := range docPointer.FindAllStringSubmatchIndex(text, -1) {
		anchor := ""
		if m[4] >= 0 {
			anchor = text[m[4]:m[5]]
		}
		check(m[0], text[m[2]:m[3]], anchor)
	}
	if inDocs && strings.HasSuffix(name, ".md") {
		for _, m := range mdLink.FindAllStringSubmatchIndex(text, -1) {
			file, anchor := name, ""
			if m[2] >= 0 {
				file = text[m[2]:m[3]]
			}
			if m[4] >= 0 {
				anchor = text[m[4]:m[5]]
			}
			check(m[0], file, anchor)
		}
	}
	return probs
}

// rootFiles is set by TestNothingPointsOutsideTheProject for fileExistsAtRoot.
var rootFiles map[string]bool

func fileExistsAtRoot(name string) bool { return rootFiles[name] }

func TestNothingPointsOutsideTheProject(t *testing.T) {
	root := repoRoot(t)
	docs := pages(t, filepath.Join(root, "docs"))
	files := projectFiles(t, root)
	rootFiles = map[string]bool{}
	for _, f := range files {
		if !strings.Contains(f, "/") {
			rootFiles[f] = true
		}
	}
	checked := 0
	for _, f := range files {
		if f == "go.sum" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 {
			continue // binary
		}
		checked++
		// The pages and this package name each other without the docs/ prefix.
		inDocs := strings.HasPrefix(f, "docs/")
		name := f
		if inDocs {
			name = filepath.Base(f)
		}
		for _, p := range pointerProblems(name, string(b), docs, inDocs) {
			t.Error(p)
		}
	}
	if checked < 50 {
		t.Fatalf("only %d files checked; the file listing is wrong", checked)
	}
}

// projectPages describe this project, not an upstream one: they cite no
// upstream source.
var projectPages = map[string]bool{"README.md": true, "architecture.md": true}

func TestEveryFactSectionCitesItsSource(t *testing.T) {
	docs := pages(t, filepath.Join(repoRoot(t), "docs"))
	for _, want := range []string{"README.md", "operator.md", "routers.md", "engines.md", "llmd.md"} {
		if _, ok := docs[want]; !ok {
			t.Errorf("docs/%s is missing", want)
		}
	}
	total := 0
	for name, text := range docs {
		if _, dups := anchors(text); len(dups) > 0 {
			t.Errorf("docs/%s: headings share the anchors %v; make them distinct so pointers stay unambiguous", name, dups)
		}
		if projectPages[name] {
			continue
		}
		for _, s := range uncited(text) {
			t.Errorf("docs/%s:%d: section %q cites no upstream source (owner/repo@commit:path)", name, s.Line, s.Heading)
		}
		n := len(citation.FindAllString(text, -1))
		total += n
		t.Logf("docs/%s: %d sections, %d citations", name, len(sections(text))-1, n)
	}
	if total == 0 {
		t.Error("no citations at all")
	}
}

func TestIndexListsEveryPage(t *testing.T) {
	docs := pages(t, filepath.Join(repoRoot(t), "docs"))
	index := docs["README.md"]
	for name := range docs {
		if name != "README.md" && !strings.Contains(index, "]("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
}

// The checks above must be able to fail; these feed them known-bad text.

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Cache-aware policy":                 "cache-aware-policy",
		"The sim's engines":                  "the-sims-engines",
		"Candidates, order and load":         "candidates-order-and-load",
		"SG-only policies":                   "sg-only-policies",
		"Prefill/decode pools":               "prefilldecode-pools",
		"llm-d scoring configuration":        "llm-d-scoring-configuration",
		"vLLM counting rules":                "vllm-counting-rules",
		"Request ids, headers and streaming": "request-ids-headers-and-streaming",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUncitedSectionsAreFound(t *testing.T) {
	page := "# Title\n\nintro\n\n## Cited\n\nfact (a/b@0123abc:src/x.rs)\n\n## Bare\n\nfact without a source\n\n```\n## not a heading\n```\n\n### Empty\n"
	got := uncited(page)
	if len(got) != 1 || got[0].Heading != "Bare" || got[0].Line != 9 {
		t.Errorf("uncited = %+v, want only section Bare at line 9", got)
	}
	if !citation.MatchString("llm-d/llm-d-router@71f4f099:pkg/epp/server/options.go") {
		t.Error("a valid citation does not match")
	}
	for _, bad := range []string{"vllm-project/router:src/main.rs", "router@e667ebb:src/main.rs", "a/b@v0.10.0:x.go"} {
		if citation.MatchString(bad) {
			t.Errorf("%q counts as a citation", bad)
		}
	}
}

func TestPointerProblemsAreFound(t *testing.T) {
	docs := map[string]string{"routers.md": "# R\n\n## Banner\n\nx (a/b@0123abc:c)\n"}
	rootFiles = map[string]bool{"README.md": true}
	ok := []string{
		"// See docs/routers.md#banner.",
		"// See docs/routers.md.",
		"oci:// reference to a chart",
		"the engines[md.Spec.Roles[i].Name] map",
		"see README.md",
	}
	for _, s := range ok {
		if p := pointerProblems("x.go", s, docs, false); len(p) > 0 {
			t.Errorf("%q: unexpected %v", s, p)
		}
	}
	bad := map[string]string{
		"// Facts: .." + "/shared/" + "reference/" + "routers.md": "outside",
		"# Sources (shared/" + "reference/): x":                   "outside",
		"(reference/" + "routers.md §2.1)":                        "outside",
		"// routers.md §2.4":                                      "not a file of this project",
		"(operator.md §5)":                                        "not a file of this project",
		"see DESIGN" + ".md":                                      "not a file of this project",
		"docs/" + "routers.md#no-such-section":                    "has no section",
		"docs/engines.md#vllm-series":                             "does not exist",
		"open /work" + "/shared/x":                                "outside",
	}
	for s, want := range bad {
		p := pointerProblems("x.go", s, docs, false)
		if len(p) == 0 || !strings.Contains(strings.Join(p, "\n"), want) {
			t.Errorf("%q: problems %v, want one saying %q", s, p, want)
		}
	}
	// Inside docs/, relative links resolve against the pages.
	if p := pointerProblems("routers.md", "[b](#banner) [c](routers.md#banner)", docs, true); len(p) > 0 {
		t.Errorf("valid links flagged: %v", p)
	}
	if p := pointerProblems("routers.md", "[x](#nope) [y](nosuch.md)", docs, true); len(p) != 2 {
		t.Errorf("broken links: %v, want 2 problems", p)
	}
	if p := pointerProblems("routers.md", "see routers.md", docs, true); len(p) > 0 {
		t.Errorf("a page naming a sibling page was flagged: %v", p)
	}
}
