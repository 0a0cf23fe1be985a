package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// Short diagnosis settings for the end-to-end runs. The recent window is
// longer than the demo's longer outputs take to generate (a batch grows
// with long outputs only as fast as they are produced: 11 to 19 s).
// Verdicts start once the history holds the recent window and a 60 s
// baseline (85 s); the shift comes 15 s later, so steady verdicts are
// checked before it. A scrape
// every 500 ms; eight engines, so that a window holds about 240 requests.
const (
	e2eDiagWindow   = 25 * time.Second
	e2eDiagBaseline = 60 * time.Second
	e2eShiftAfter   = 100 * time.Second
	// 500 ms, not less: at load 30 on 2 cores a scrape of the eight
	// engines' page takes up to a few hundred milliseconds.
	e2eDiagInterval = 500 * time.Millisecond
	// A few intervals after the recent window has filled with the shift.
	e2eDiagSlack = 3 * time.Second
)

// diagnosisSidecar starts the real binary on the demo with one scenario.
func diagnosisSidecar(t *testing.T, scenario string) (*testbin.Process, time.Time) {
	t.Helper()
	testbin.Build(t) // before the clock starts: the first call compiles
	start := time.Now()
	p := testbin.Start(t,
		"--demo", "--demo.engines=8", "--demo.scenario="+scenario,
		"--demo.shift-after="+e2eShiftAfter.String(),
		"--vllm.scrape-interval="+e2eDiagInterval.String(),
		// The whole interval: a busy machine must not turn scrapes of
		// the 330 KB page into timeouts.
		"--vllm.timeout="+e2eDiagInterval.String(),
		"--derive.window=25s",
		"--diagnosis.window="+e2eDiagWindow.String(),
		"--diagnosis.baseline="+e2eDiagBaseline.String(),
	)
	return p, start
}

// parseDiagnosisGauges reads the vllm_diagnosis_* series of /metrics: for each
// family, label value (cause, symptom, signal) -> value.
func parseDiagnosisGauges(body []byte) map[string]map[string]float64 {
	out := map[string]map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "vllm_diagnosis_") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		lbls, val, _ := strings.Cut(rest, "} ")
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			v = -1 // not a number: counts as active, and shows in the failure
		}
		key := ""
		for kv := range strings.SplitSeq(lbls, ",") {
			k, q, _ := strings.Cut(kv, "=")
			if k == "cause" || k == "symptom" || k == "signal" {
				key = strings.Trim(q, `"`)
			}
		}
		if out[name] == nil {
			out[name] = map[string]float64{}
		}
		out[name][key] = v
	}
	return out
}

func activeOf(m map[string]float64) []string {
	var out []string
	for k, v := range m {
		if v != 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// scenarioOutcome is what one scenario's run found.
type scenarioOutcome struct {
	failure string        // "" when the run met every expectation
	seen    time.Duration // when the cause appeared after the shift
	logs    string
	// starved says the machine failed more than a tenth of the scrapes:
	// what the windows then lack is logged, not failed; a wrong verdict
	// still fails.
	starved string
}

// runScenario watches one sidecar until the recent window (plus a few
// intervals) after the shift has passed.
func runScenario(t *testing.T, sc string, p *testbin.Process, start time.Time) scenarioOutcome {
	shiftAt := start.Add(e2eShiftAfter)
	deadline := shiftAt.Add(e2eDiagWindow + e2eDiagSlack)
	out := scenarioOutcome{seen: -1}
	var last map[string]map[string]float64
	verdictsBeforeShift := false
	polls, failed := 0, 0
	for time.Now().Before(deadline) {
		time.Sleep(e2eDiagInterval)
		r, err := get(client, p.URL+"/metrics", nil)
		if err != nil {
			out.failure = err.Error()
			return out
		}
		g := parseDiagnosisGauges(r.body)
		// A page after a failed scrape has no verdict, rightly: the end
		// state is judged on the last page of a successful one.
		polls++
		if bytes.Contains(r.body, []byte("\nvllm_up 1\n")) {
			last = g
		} else {
			failed++
		}
		causes := activeOf(g["vllm_diagnosis_cause"])
		now := time.Now()
		switch {
		case sc == demo.ScenarioSteady || now.Before(shiftAt.Add(-e2eDiagInterval)):
			if now.Before(shiftAt) && len(g["vllm_diagnosis_cause"]) > 0 {
				verdictsBeforeShift = true
			}
			if len(causes) > 0 {
				out.failure = fmt.Sprintf("%s after start, before any shift: causes %v; symptoms %v; ratios %v", now.Sub(start).Round(time.Millisecond), causes, g["vllm_diagnosis_symptom"], g["vllm_diagnosis_change_ratio"])
				return out
			}
		case len(causes) > 0:
			// Until the recent window holds only shifted seconds its
			// baseline holds only steady ones: one thing changed, so only
			// its cause may show. Past that (the slack) the baseline starts
			// to take in the shift itself (the burst of preemptions when
			// the KV cache shrinks): there only the right cause's
			// appearance counts.
			clean := !now.After(shiftAt.Add(e2eDiagWindow))
			if !clean && !slices.Contains(causes, sc) {
				continue
			}
			if clean && !slices.Equal(causes, []string{sc}) {
				out.failure = fmt.Sprintf("%s after the shift: causes %v, want only %s; ratios %v", now.Sub(shiftAt).Round(time.Millisecond), causes, sc, g["vllm_diagnosis_change_ratio"])
				return out
			}
			if out.seen < 0 {
				out.seen = now.Sub(shiftAt)
			}
		}
	}
	// What starved windows cannot show (a verdict that never came) is
	// waived when more than a tenth of the scrapes failed; a wrong verdict
	// fails whatever the machine did.
	missing := ""
	switch {
	case !verdictsBeforeShift:
		missing = "no verdict (all causes at 0) was published before the shift: the steady phase went unchecked"
	case sc == demo.ScenarioSteady:
		if len(last["vllm_diagnosis_cause"]) != len(diagnosis.Causes()) || // one gauge per cause record
			len(last["vllm_diagnosis_symptom"]) != 3 {
			missing = fmt.Sprintf("steady: want every cause and symptom at 0 by the end, got %v %v", last["vllm_diagnosis_cause"], last["vllm_diagnosis_symptom"])
		} else if a := activeOf(last["vllm_diagnosis_symptom"]); len(a) > 0 {
			out.failure = fmt.Sprintf("steady: symptoms %v", a)
		}
	case out.seen < 0:
		missing = fmt.Sprintf("%s did not appear within %s of the shift; last ratios %v", sc, e2eDiagWindow+e2eDiagSlack, last["vllm_diagnosis_change_ratio"])
	}
	switch {
	case missing == "":
	case failed*10 > polls:
		out.starved = fmt.Sprintf("%d of %d polls came after a failed scrape, so the windows lacked data: %s", failed, polls, missing)
	default:
		out.failure = missing
	}
	return out
}

// TestDiagnosisScenarios runs the binary once per demo scenario, all at
// the same time (not as parallel subtests, which -parallel would queue):
// before the shift no cause is claimed; from the shift to the end of the
// recent window plus a few intervals, only the scenario's cause may
// appear, and it must; steady stays all zero for the whole run and ends
// with every symptom and cause present at 0.
func TestDiagnosisScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary for more than two minutes (all scenarios at once)")
	}
	outcomes := make([]scenarioOutcome, len(demo.Scenarios))
	var wg sync.WaitGroup
	for i, sc := range demo.Scenarios {
		p, start := diagnosisSidecar(t, sc)
		wg.Go(func() {
			outcomes[i] = runScenario(t, sc, p, start)
			outcomes[i].logs = p.Logs()
		})
	}
	wg.Wait()
	for i, sc := range demo.Scenarios {
		t.Run(sc, func(t *testing.T) {
			o := outcomes[i]
			if o.failure != "" {
				t.Fatalf("%s\nsidecar log:\n%s", o.failure, o.logs)
			}
			if o.starved != "" {
				waive(t, "%s", o.starved)
				return
			}
			if o.seen >= 0 {
				t.Logf("%s appeared %s after the shift", sc, o.seen.Round(time.Millisecond))
			}
		})
	}
}
