package mapping

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The docs name the servers the built-in profiles describe: a profile added
// without its mention fails here, saying where to add it.

// titleWord matches a server's title as a word of its own.
func titleWord(title string) *regexp.Regexp {
	return regexp.MustCompile(`(^|[^\w.-])` + regexp.QuoteMeta(title) + `($|[^\w-])`)
}

// serverLists are the places in the docs that list the servers: a line
// (a sentence or a table's header) or, with paragraph, the paragraph it
// starts, found by the text it starts with.
var serverLists = []struct {
	page, start string
	paragraph   bool
	others      bool // lists the servers other than vLLM
	ids         bool // names them by server, in backticks
}{
	{page: "README.md", start: "A sidecar for LLM inference servers", paragraph: true},
	{page: "docs/engines.md", start: "# Engines: one schema of roles for"},
	{page: "docs/engines.md", start: "| role | unit | vLLM (V1 name) |"},
	{page: "docs/engines.md", start: "| derived gauge | input roles |"},
	{page: "docs/engines.md", start: "| finding | needs |"},
	{page: "docs/autoscaling.md", start: "| gauge | vLLM |"},
	{page: "docs/metrics.md", start: "vLLM page; on a page of another server (", others: true},
	{page: "docs/metrics.md", start: "| `vllm_normalizer_upstream_info{", ids: true},
}

// Each list of servers in the docs names every built-in profile's server.
func TestDocsServerListsNameEveryProfile(t *testing.T) {
	titles := ServerTitles()
	servers := make([]string, 0, len(titles))
	for s := range titles {
		servers = append(servers, s)
	}
	slices.Sort(servers)
	for _, l := range serverLists {
		raw, err := os.ReadFile(filepath.Join("..", l.page))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		at := slices.IndexFunc(lines, func(s string) bool { return strings.HasPrefix(s, l.start) })
		if at < 0 {
			t.Errorf("%s has no line starting %q: where does it list the servers now? Update serverLists", l.page, l.start)
			continue
		}
		text := lines[at]
		for k := at + 1; l.paragraph && k < len(lines) && lines[k] != ""; k++ {
			text += "\n" + lines[k]
		}
		for _, s := range servers {
			if l.others && s == ServerVLLM {
				continue
			}
			word := titleWord(titles[s])
			if l.ids {
				word = regexp.MustCompile("`" + s + "`")
			}
			if !word.MatchString(text) {
				name := titles[s]
				if l.ids {
					name = "`" + s + "`"
				}
				t.Errorf("%s:%d lists the servers but not %s (mapping/profiles/%s.yaml): add it there (a column, in a table)", l.page, at+1, name, s)
			}
		}
	}
}

// The README's table of servers has a row per profile, and docs/engines.md's
// table of profiles a row per file.
func TestDocsTablesHaveEveryProfile(t *testing.T) {
	read := func(path string) string {
		raw, err := os.ReadFile(filepath.Join("..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	readme, engines := read("README.md"), read("docs/engines.md")
	section := func(doc, heading string) string {
		i := strings.Index(doc, "\n"+heading+"\n")
		if i < 0 {
			t.Fatalf("no section %q", heading)
		}
		rest := doc[i+len(heading)+2:]
		if j := strings.Index(rest, "\n#"); j >= 0 {
			rest = rest[:j]
		}
		return rest
	}
	servers, profiles := section(readme, "## Servers and consumers"), section(engines, "## Profiles")
	for s, title := range ServerTitles() {
		if !regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(title) + `\b`).MatchString(servers) {
			t.Errorf("README.md's servers table (## Servers and consumers) has no row for %s (mapping/profiles/%s.yaml): add one starting \"| %s\"", title, s, title)
		}
		if !strings.Contains(profiles, fmt.Sprintf("| `%s.yaml` |", s)) {
			t.Errorf("docs/engines.md's table of profiles (## Profiles) has no row for %s.yaml: add one", s)
		}
	}
}
