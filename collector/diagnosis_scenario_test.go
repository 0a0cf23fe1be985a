package collector

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/diagnosis"
)

// TestDiagnosisDemoScenarios runs the whole pipeline (the demo upstream
// over HTTP, parse, normalise, the diagnosis input, the diagnosis) on a
// fake clock for every demo scenario: before the shift nothing is claimed;
// within the window (plus a few scrapes) after it the scenario's cause
// appears, and no other cause does until the shifted load reaches the
// baseline. steady stays all zero throughout. The end-to-end test in e2e/
// does the same against the real binary and real time, shorter.
func TestDiagnosisDemoScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every demo scenario for minutes of simulated time")
	}
	const (
		shift  = 3*time.Minute + 30*time.Second
		window = 30 * time.Second
		base   = 150 * time.Second
	)
	for _, sc := range demo.Scenarios {
		if raceEnabled && sc != demo.ScenarioQueueing && sc != demo.ScenarioPreemptions {
			// The race detector makes each scenario's minutes of simulated
			// time ten times slower: two run under -race (a prefill cause
			// and the memory cause, each steady before its shift), all of
			// them without it.
			continue
		}
		t.Run(sc, func(t *testing.T) {
			c, d, clock := diagnosedDemo(t, demo.Options{Seed: scenarioSeed(), Engines: 4, Scenario: sc, ShiftAfter: shift},
				diagnosis.Options{Window: window, Baseline: base, MinChange: 0.25, Interval: time.Second}, nil)
			start := clock.Now()
			first := time.Duration(-1)
			for clock.Now().Sub(start) < shift+window+10*time.Second {
				c.ScrapeOnce(context.Background())
				at := clock.Now().Sub(start)
				rep := d.Report()
				var causes []string
				if len(rep.Models) == 1 {
					for _, f := range rep.Models[0].Causes {
						if f.Active {
							causes = append(causes, f.Name)
						}
					}
				}
				if os.Getenv("DIAGNOSIS_TRACE") != "" && (int(at.Seconds())%10 == 0 || (at > shift && at < shift+40*time.Second)) && len(rep.Models) == 1 {
					var b strings.Builder
					for _, st := range rep.Models[0].Steps {
						for _, s := range st.Signals {
							if s.Ratio != nil {
								fmt.Fprintf(&b, " %s=%.2f", s.Signal, *s.Ratio)
							} else {
								fmt.Fprintf(&b, " %s=%s", s.Signal, s.Change)
							}
						}
					}
					t.Logf("%4.0fs %v%s", at.Seconds(), causes, b.String())
				}
				switch {
				case at < shift || sc == demo.ScenarioSteady:
					if len(causes) > 0 {
						t.Fatalf("at %s, before any shift: causes %v", at, causes)
					}
				case len(causes) > 0:
					if !slices.Equal(causes, []string{sc}) {
						t.Fatalf("at %s (%s after the shift): causes %v, want only %s", at, at-shift, causes, sc)
					}
					if first < 0 {
						first = at - shift
					}
				}
				clock.Advance(time.Second)
			}
			if sc != demo.ScenarioSteady && first < 0 {
				t.Fatalf("%s never appeared within %s of the shift", sc, window+10*time.Second)
			}
			t.Logf("%s appeared %s after the shift", sc, first)
		})
	}
}

// scenarioSeed is 3, or DIAGNOSIS_SEED to try the scenarios with other
// random draws.
func scenarioSeed() int64 {
	if s, err := strconv.ParseInt(os.Getenv("DIAGNOSIS_SEED"), 10, 64); err == nil {
		return s
	}
	return 3
}

// TestDiagnosisDemoLongIncident runs every demo scenario with the README's
// windows (20 s / 60 s) through an incident five baselines long, where a
// rolling baseline used to take the incident in and clear the verdict: the
// scenario's cause, and only it, is named in at least 95 % of the polls from
// the recent window + 15 s after the shift on.
func TestDiagnosisDemoLongIncident(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every demo scenario for minutes of simulated time")
	}
	const (
		shift  = 2 * time.Minute
		window = 20 * time.Second
		base   = 60 * time.Second
	)
	for _, sc := range demo.Scenarios[1:] {
		if raceEnabled && sc != demo.ScenarioQueueing {
			continue // ten times slower under -race: one scenario there, all without
		}
		t.Run(sc, func(t *testing.T) {
			c, d, clock := diagnosedDemo(t, demo.Options{Seed: scenarioSeed(), Engines: 4, Scenario: sc, ShiftAfter: shift},
				diagnosis.Options{Window: window, Baseline: base, MinChange: 0.25, Interval: time.Second}, nil)
			start := clock.Now()
			wrong, polls := 0, 0
			var last []string
			for clock.Now().Sub(start) < shift+5*base {
				c.ScrapeOnce(context.Background())
				at := clock.Now().Sub(start)
				clock.Advance(time.Second)
				if at <= shift+window+15*time.Second {
					continue
				}
				var causes []string
				if rep := d.Report(); len(rep.Models) == 1 {
					for _, f := range rep.Models[0].Causes {
						if f.Active {
							causes = append(causes, f.Name)
						}
					}
				}
				polls++
				if !slices.Equal(causes, []string{sc}) {
					wrong++
					last = causes
				}
			}
			if share := float64(wrong) / float64(polls); share > 0.05 {
				t.Fatalf("%s: a wrong or missing verdict in %d of %d polls (last %v), want at most 5 %%", sc, wrong, polls, last)
			}
			t.Logf("%s: %d of %d polls wrong or missing", sc, wrong, polls)
		})
	}
}
