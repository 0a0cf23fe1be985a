package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// aibrixTable reads the names readers.yaml says AIBrix reads of an engine
// (its waiting, running, kv_usage and families fields): a reader of its
// own, for this module takes no YAML dependency.
func aibrixTable(t *testing.T, engine string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), "routing", "readers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "  - consumer: aibrix\n")
	if i < 0 {
		t.Fatal("readers.yaml has no aibrix consumer")
	}
	text = text[i:]
	j := strings.Index(text, "\n      "+engine+":\n")
	if j < 0 {
		t.Fatalf("readers.yaml's aibrix has no %s engine", engine)
	}
	var names []string
	for _, line := range strings.Split(text[j+1:], "\n")[1:] {
		if !strings.HasPrefix(line, "        ") {
			break
		}
		f := strings.TrimSpace(line)
		for _, key := range []string{"waiting: ", "running: ", "kv_usage: ", "- "} {
			if v, ok := strings.CutPrefix(f, key); ok {
				names = append(names, strings.Trim(v, `"`))
			}
		}
	}
	return names
}

// AIBrix on pods labelled sglang or trtllm, pointed at the routing
// listener (its metric-port; /prometheus/metrics for trtllm), reads every
// name of its table as it reads it from the server: nothing it reads is
// missing, nothing has another value.
func TestAIBrixReadsTheCompatibilityPage(t *testing.T) {
	for _, tc := range []struct {
		engine, fixture, model, path string
	}{
		{"sglang", "26", "Qwen/Qwen3-0.6B", "/metrics"},
		{"sglang", "37", "Qwen/Qwen3-0.6B", "/metrics"},
		{"trtllm", "31", "Qwen/Qwen3-0.6B", "/prometheus/metrics"},
	} {
		t.Run(tc.engine+" "+tc.fixture, func(t *testing.T) {
			names := aibrixTable(t, tc.engine)
			if len(names) < 4 {
				t.Fatalf("aibrix's %s table has %d names: %v", tc.engine, len(names), names)
			}
			body := Fixture(t, tc.fixture)
			raw, err := AIBrixRead(body, tc.model, names)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) == 0 {
				t.Fatalf("AIBrix reads nothing of %v from fixture %s", names, tc.fixture)
			}
			up := NewUpstream(t, body)
			side := StartSidecar(t, up)
			status, page, err := Status(side.RoutingURL + tc.path)
			if err != nil || status != 200 {
				t.Fatalf("routing listener %s: %d %v", tc.path, status, err)
			}
			got, err := AIBrixRead(page, tc.model, names)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range raw {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("%s: %v from the sidecar (present %v), %v from the server", k, g, ok, v)
				}
			}
		})
	}
}
