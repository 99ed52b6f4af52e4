package structure

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

var (
	markdownLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	markdownHeading = regexp.MustCompile(`(?m)^#+ (.+)$`)
)

// anchor is the fragment GitHub gives a heading: lower case, letters, digits, spaces, hyphens
// and underscores kept, spaces turned into hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinksResolve: every relative link in README.md and docs/ names a file of the repository
// and, with a fragment into a Markdown file, one of its headings. The README is the user's way in
// and docs/ one page per task: a moved section must not leave links into nothing behind.
func TestDocsLinksResolve(t *testing.T) {
	root := repoRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(root, "README.md"))
	anchors := map[string]map[string]bool{}
	headings := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		a := map[string]bool{}
		if data, err := os.ReadFile(path); err == nil {
			for _, m := range markdownHeading.FindAllStringSubmatch(string(data), -1) {
				a[anchor(m[1])] = true
			}
		}
		anchors[path] = a
		return a
	}
	for _, page := range pages {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, m := range markdownLink.FindAllStringSubmatch(string(data), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(link, "#")
			target := page
			if file != "" {
				target = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, link)
					continue
				}
			}
			if fragment != "" && strings.HasSuffix(target, ".md") && !headings(target)[fragment] {
				t.Errorf("%s links to %s: no such heading", rel, link)
			}
		}
	}
}
