package derive

import (
	"math"
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/window"
)

// idleSignal is how a sample says the server is working.
type idleSignal uint8

const (
	// idleCounter samples "move" when their reset-corrected increase
	// since the previous scrape is positive: a restart to zero is no
	// work, a restart to 3 is three.
	idleCounter idleSignal = iota
	// idleRunning and idleWaiting mean work while above 0, so a long
	// request that finishes nothing for minutes keeps its pod busy. Both
	// are required: without them a request in progress would look idle.
	idleRunning
	idleWaiting
)

// idleRoles are the roles that say the server is working: a request
// finished, a prompt was prefilled, a token was generated (where the
// server has these counters; they catch requests shorter than a scrape
// interval), a request is running or waiting.
var idleRoles = map[mapping.Role]idleSignal{
	mapping.RoleRequestsFinished: idleCounter,
	mapping.RolePromptTokens:     idleCounter,
	mapping.RoleGenerationTokens: idleCounter,
	mapping.RoleRequestsRunning:  idleRunning,
	mapping.RoleRequestsWaiting:  idleWaiting,
}

// idleKey is the (model_name, engine) an idle time belongs to.
type idleKey = groupKey

// IdleTracker knows, per model_name and engine, when the server was last
// seen working (a request counter moved, or a request was running or
// waiting), for vllm_derived_idle_seconds. It is not safe for concurrent
// use; the scrape loop owns it.
type IdleTracker struct {
	start time.Time // the sidecar's start: "idle since" for never-busy groups
	// samples maps the sample names of idleRoles on the canonical page to
	// their signal; families holds their family names, to skip the rest
	// of the page quickly.
	samples  map[string]idleSignal
	families map[string]bool
	// counters: what each request counter series counted since the
	// previous observation.
	counters *window.Increases
	busyAt   map[idleKey]time.Time
	// seen has, per group of the last observation, a bit per in-flight
	// gauge it had (1 running, 2 waiting); a group with both is present.
	seen     map[idleKey]uint8
	observed bool
}

// idleForgetAfter is how many observations a request counter missing from
// the page is remembered: back within them, it moved only if it rose.
const idleForgetAfter = 64

// NewIdleTracker returns a tracker of the canonical page d reads, for a
// sidecar started at start.
func (d *Deriver) NewIdleTracker(start time.Time) *IdleTracker {
	samples, families := map[string]idleSignal{}, map[string]bool{}
	for role, sig := range idleRoles {
		if name := d.roles.Sample(role, mapping.PartValue); name != "" {
			samples[name] = sig
			families[d.roles.Family(role)] = true
		}
	}
	return &IdleTracker{start: start, samples: samples, families: families, counters: window.NewIncreases(idleForgetAfter), busyAt: map[idleKey]time.Time{}}
}

// Observe reads one successful scrape's canonical page, taken at now.
func (t *IdleTracker) Observe(now time.Time, fams []exposition.Family) {
	t.counters.Next()
	t.seen = map[idleKey]uint8{}
	for fi := range fams {
		f := &fams[fi]
		if !t.families[f.Name] {
			continue
		}
		for si := range f.Samples {
			s := &f.Samples[si]
			name := s.Name()
			sig, ok := t.samples[name]
			if !ok || math.IsNaN(s.Value) {
				continue
			}
			k := idleKey{s.Labels.Get(mapping.LabelModel), s.Labels.Get(mapping.LabelEngine)}
			t.seen[k] |= 0 // known group, whatever the signal: its busy time is kept
			busy := false
			switch sig {
			case idleCounter:
				busy = t.moved(s)
			case idleRunning:
				t.seen[k] |= 1
				busy = s.Value > 0
			case idleWaiting:
				t.seen[k] |= 2
				busy = s.Value > 0
			}
			if busy {
				t.busyAt[k] = now
			}
		}
	}
	// Forget groups no longer present.
	for k := range t.busyAt {
		if _, ok := t.seen[k]; !ok {
			delete(t.busyAt, k)
		}
	}
	t.observed = true
}

// moved records counter sample s and reports whether it moved since the
// previous observation. A series first seen after the first observation
// counts from zero (it appeared because something happened); on the first
// observation nothing is known about the past, so nothing moved.
func (t *IdleTracker) moved(s *exposition.Sample) bool {
	inc, isNew := t.counters.Observe(s.Labels, s.Value)
	if isNew {
		return t.observed && s.Value > 0
	}
	return inc > 0
}

// idleSeconds returns the seconds since each present group (one with
// both in-flight gauges) was last busy,
// or since the sidecar started if it never was; with byEngine false,
// engines are collapsed: a model is idle since its last busy engine was.
func (t *IdleTracker) idleSeconds(now time.Time, byEngine bool) map[idleKey]float64 {
	last := map[idleKey]time.Time{}
	for k, bits := range t.seen {
		if bits != 3 {
			continue
		}
		at, ok := t.busyAt[k]
		if !ok {
			at = t.start
		}
		if !byEngine {
			k.engine = ""
		}
		if prev, ok := last[k]; !ok || at.After(prev) {
			last[k] = at
		}
	}
	out := make(map[idleKey]float64, len(last))
	for k, at := range last {
		out[k] = max(0, now.Sub(at).Seconds())
	}
	return out
}
