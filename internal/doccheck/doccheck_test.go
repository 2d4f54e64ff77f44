package doccheck

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the module root, two directories above this package.
const root = "../.."

var (
	// codeLink is a citation in Go source: a path under docs/ ending in .md,
	// optionally followed by #anchor.
	codeLink = regexp.MustCompile(`docs/[A-Za-z0-9_./-]+\.md(#[\p{L}\p{N}_-]+)?`)
	// mdLink is a relative link in a markdown document: ](FILE.md#anchor) or ](#anchor).
	mdLink = regexp.MustCompile(`\]\(([A-Za-z0-9_./-]*\.md)?(#[\p{L}\p{N}_-]+)?\)`)
	// staleCite is a section citation of the specifications outside the repository.
	staleCite = regexp.MustCompile(`§\s*\d`)
)

// slug returns the anchor GitHub gives a heading: lower case, spaces to
// hyphens, and every character but letters, digits, '-' and '_' dropped.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the heading anchors of the markdown file at path, with
// GitHub's -1, -2 … suffixes for repeated headings; fenced code is skipped.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	set := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		s := slug(h)
		if n := seen[s]; n > 0 {
			set[s+"-"+itoa(n)] = true
		} else {
			set[s] = true
		}
		seen[s]++
	}
	return set
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// checker resolves links, caching each document's anchors.
type checker struct {
	t     *testing.T
	cache map[string]map[string]bool
}

// check reports whether file (relative to the module root) exists and, if
// anchor is not empty, has a heading with that anchor.
func (c *checker) check(where, file, anchor string) {
	c.t.Helper()
	a, ok := c.cache[file]
	if !ok {
		if _, err := os.Stat(filepath.Join(root, file)); err != nil {
			c.t.Errorf("%s: %s does not exist", where, file)
			c.cache[file] = nil
			return
		}
		a = anchors(c.t, filepath.Join(root, file))
		c.cache[file] = a
	}
	if a == nil || anchor == "" {
		return
	}
	if !a[anchor] {
		c.t.Errorf("%s: %s has no heading #%s", where, file, anchor)
	}
}

// TestCodeCitations checks every docs/ link in the Go and assembly sources
// and that no
// citation of the external specifications ("spec §N") is left.
func TestCodeCitations(t *testing.T) {
	c := &checker{t: t, cache: map[string]map[string]bool{}}
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".s") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, _ := filepath.Rel(root, path)
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for line := 1; sc.Scan(); line++ {
			text := sc.Text()
			where := rel + ":" + itoa(line)
			if staleCite.MatchString(text) {
				t.Errorf("%s: cites a section of a specification outside the repository: %s", where, strings.TrimSpace(text))
			}
			for _, m := range codeLink.FindAllStringSubmatch(text, -1) {
				file, anchor, _ := strings.Cut(m[0], "#")
				c.check(where, file, anchor)
				n++
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("found no docs/ citations in the Go sources")
	}
}

// TestDocumentLinks checks the relative links of README.md and docs/.
func TestDocumentLinks(t *testing.T) {
	c := &checker{t: t, cache: map[string]map[string]bool{}}
	docs := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			docs = append(docs, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		data, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				file := doc
				if m[1] != "" {
					file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), m[1]))
				}
				c.check(doc+":"+itoa(i+1), file, strings.TrimPrefix(m[2], "#"))
			}
		}
	}
}
