// Package docs holds no Go code: its test checks that the links of the
// README, the CHANGELOG and the pages here lead somewhere.
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

var (
	codeSpan   = regexp.MustCompile("`+[^`\\n]*`+")
	heading    = regexp.MustCompile(`(?m)^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$`)
	scheme     = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
	linkText   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	// inlineLink is [text](target "title"); the text may hold one level
	// of brackets, as [`x[0]`](y).
	inlineLink = regexp.MustCompile(`\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
)

// prose is a page with the lines of its fenced code blocks emptied: they
// hold no links or headings.
func prose(text string) string {
	lines := strings.Split(text, "\n")
	open := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		switch {
		case open == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")):
			open = t[:3]
		case open != "" && strings.HasPrefix(t, open):
			open = ""
		case open == "":
			continue
		}
		lines[i] = ""
	}
	return strings.Join(lines, "\n")
}

// slug is the anchor GitHub gives a heading: lower case, punctuation but
// - and _ dropped, spaces turned into -.
func slug(h string) string {
	h = codeSpan.ReplaceAllStringFunc(h, func(s string) string { return strings.Trim(s, "`") })
	h = linkText.ReplaceAllString(h, "$1") // a link's text
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors are the anchors of a page: its headings' (a repeated one gets
// -1, -2, ...) and its HTML ids.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	text = prose(text)
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		base := slug(m[1])
		a := base
		for i := 1; out[a]; i++ {
			a = base + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(text, -1) {
		out[m[1]] = true
	}
	return out
}

// Every relative link of README.md, CHANGELOG.md and docs/*.md names a file
// or directory of the repository, and every #anchor a heading (or id) of
// the page it points into.
func TestLinksResolve(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join("..", "README.md"), filepath.Join("..", "CHANGELOG.md")}, pages...)
	cache := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := cache[path]; ok {
			return a, nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		cache[path] = anchors(string(raw))
		return cache[path], nil
	}
	links := 0
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		// the whole page at once: a link's text may wrap across lines
		text := codeSpan.ReplaceAllStringFunc(prose(string(raw)), func(s string) string { return strings.Repeat(" ", len(s)) })
		for _, m := range inlineLink.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			if scheme.MatchString(target) {
				continue // http:, https:, mailto: — not ours to check here
			}
			links++
			where := strings.TrimPrefix(page, "../") + ":" + strconv.Itoa(1+strings.Count(text[:m[0]], "\n"))
			path, anchor, _ := strings.Cut(target, "#")
			file := page
			if path != "" {
				file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
				if _, err := os.Stat(file); err != nil {
					t.Errorf("%s: link %q: %s does not exist", where, target, path)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			as, err := anchorsOf(file)
			if err != nil {
				t.Errorf("%s: link %q: %v", where, target, err)
				continue
			}
			if !as[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", where, target, filepath.Base(file), anchor)
			}
		}
	}
	if links < 50 {
		t.Errorf("checked only %d relative links; has the link syntax changed?", links)
	}
}
