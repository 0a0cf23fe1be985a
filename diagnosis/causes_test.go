package diagnosis

import (
	"html/template"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// TestCauseRecords: every record has what the report and the page print,
// a step that exists, and one kind (a rule, a topology finding, or the
// residual); names are unique.
func TestCauseRecords(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range causes {
		if seen[c.Name] {
			t.Errorf("two records named %q", c.Name)
		}
		seen[c.Name] = true
		if c.Short == "" || c.Action == "" || c.PromQL == "" || c.Sentence == "" && c.sentenceOf == nil {
			t.Errorf("%s: a short name, sentence, action and PromQL are each required: %+v", c.Name, c)
		}
		if c.Step < 2 || c.Step > len(steps) {
			t.Errorf("%s: step %d, want one of the cause steps 2..%d", c.Name, c.Step, len(steps))
		}
		kinds := 0
		for _, b := range []bool{c.rule != nil, c.finding != nil, c.residual} {
			if b {
				kinds++
			}
		}
		if kinds != 1 {
			t.Errorf("%s: a record has exactly one of rule, finding and residual", c.Name)
		}
		if (c.finding != nil) != (c.Step == topologyStepNumber) {
			t.Errorf("%s: topology findings, and only they, belong to step %d", c.Name, topologyStepNumber)
		}
	}
}

// TestCauseDocsRows: docs/diagnosis.md has a row per cause, in the causes'
// table (with the record's step) or the topology findings' one, showing the
// record's PromQL.
func TestCauseDocsRows(t *testing.T) {
	b, err := os.ReadFile("../docs/diagnosis.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 3 || !strings.HasPrefix(line, "| `") {
			continue
		}
		name := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		if _, dup := rows[name]; !dup {
			rows[name] = cells
		}
	}
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range causes {
		promQL := cat.Roles().Expand(c.PromQL)
		cells, ok := rows[c.Name]
		if !ok {
			t.Errorf("docs/diagnosis.md has no row for the cause %s", c.Name)
			continue
		}
		if c.finding == nil && cells[1] != string(rune('0'+c.Step)) {
			t.Errorf("docs/diagnosis.md gives %s step %q, its record %d", c.Name, cells[1], c.Step)
		}
		if last := cells[len(cells)-1]; !strings.Contains(last, "`"+promQL+"`") {
			t.Errorf("docs/diagnosis.md's PromQL for %s is\n%s\nwant it to show the record's\n`%s`", c.Name, last, promQL)
		}
	}
}

// TestCauseFromOneRecord adds a cause with one record and nothing else,
// and sees it evaluated, reported, served as a gauge and on the page: a KV
// cache near full behind a TTFT rise (made up for the test; KV usage alone
// is no cause of the product's).
func TestCauseFromOneRecord(t *testing.T) {
	saved := causes
	t.Cleanup(func() { causes = saved })
	const name = "kv_cache_nearly_full"
	causes = append(slices.Clip(causes), Cause{Name: name, Step: 3, Short: "a nearly full KV cache",
		Sentence: "The KV cache is nearly full.", Action: "Give it more memory.", PromQL: "prefill and up(kv_cache_usage)",
		NoDemo: "made up for a test",
		rule:   func(x *causeInput) bool { return x.prefill && x.up(sKV) }})

	s := healthy
	s.kv, s.ttft = 0.9, 0.3
	// 130 s: without the record this shift is unexplained (TestKVRiseIsNotBad's).
	d, fams, rep := run(t, testOpts, timeline(640, 130, s))
	if got := active(values(fams, FamilyCause, "cause")); !slices.Equal(got, []string{name}) {
		t.Errorf("causes named %v, want [%s] alone (it explains the symptom: not unexplained)", got, name)
	}
	mr := rep.Models[0]
	if mr.Incident == nil || len(mr.Incident.Causes) != 1 || mr.Incident.Causes[0] != (Action{Cause: name, Sentence: "The KV cache is nearly full.", Action: "Give it more memory."}) {
		t.Fatalf("incident %+v, want the record's cause with its sentence and action", mr.Incident)
	}
	st := mr.Steps[2]
	if st.Verdict != "found: a nearly full KV cache" || !slices.Contains(st.Findings, Finding{Name: name, Active: true}) {
		t.Errorf("step 3 verdict %q, findings %+v", st.Verdict, st.Findings)
	}
	rec := httptest.NewRecorder()
	d.PageHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/diagnosis", nil))
	html := rec.Body.String()
	for _, want := range []string{
		`data-finding="` + name + `" data-active="true"`,
		"<b>The KV cache is nearly full.</b> Give it more memory.",
		template.HTMLEscapeString("found: a nearly full KV cache"),
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
