package demo

import (
	"bytes"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

//go:embed vllm-v1.prom
var dump []byte

// Dump returns a copy of the embedded original page.
func Dump() []byte { return bytes.Clone(dump) }

// Options configure an Upstream.
type Options struct {
	// Now is the clock; nil means time.Now. Tests inject a fake clock.
	Now func() time.Time
	// Seed makes the simulation deterministic: the same seed and the same
	// sequence of clock readings give the same pages.
	Seed int64
	// Engines is the number of data-parallel engines to simulate, labelled
	// engine="0".."N-1". 0 or 1 means the dump's single engine.
	Engines int
	// Scenario, when set, replaces the default wavy load by a steady one
	// that, for every scenario but ScenarioSteady, shifts one thing after
	// ShiftAfter (0 means DefaultShiftAfter); see scenario.go.
	Scenario   string
	ShiftAfter time.Duration
}

// maxCatchUp bounds how much simulated time one page may have to compute:
// after a longer pause (a laptop waking up) the simulation skips ahead.
const maxCatchUp = 5 * time.Minute

// warmUp is the simulated time run before the first page, so that the very
// first scrape already shows requests in flight.
const warmUp = 60.0

// Upstream is a simulated vLLM server. It is safe for concurrent use.
type Upstream struct {
	now func() time.Time

	mu      sync.Mutex
	fams    []exposition.Family // current values; the page is rendered from them
	engines []*engine
	shared  sharedMetrics
	last    time.Time // clock reading the simulation has reached
	simT    float64   // simulated seconds, equal for every engine's target
	lastLen int
}

// New parses the embedded dump and starts the simulation at opts.Now().
func New(opts Options) (*Upstream, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	n := max(opts.Engines, 1)
	fams, _, err := exposition.Parse(dump, exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		return nil, fmt.Errorf("demo: parse embedded page: %w", err)
	}
	fams = replicateEngines(fams, n)
	var sc *scenarioRun
	if opts.Scenario != "" {
		if err := CheckScenario(opts.Scenario); err != nil {
			return nil, fmt.Errorf("demo: %w", err)
		}
		if opts.ShiftAfter < 0 {
			return nil, fmt.Errorf("demo: the scenario's shift time must not be negative, got %s", opts.ShiftAfter)
		}
		if opts.ShiftAfter == 0 {
			opts.ShiftAfter = DefaultShiftAfter
		}
		before, after := scenarioLoads(opts.Scenario)
		sc = &scenarioRun{before: before, after: after, shiftAt: warmUp + opts.ShiftAfter.Seconds()}
	}
	capped := sc != nil && max(sc.before.queuedCap, sc.after.queuedCap) > 0
	if capped {
		fams = addAdmissionFamilies(fams)
	}
	u := &Upstream{now: opts.Now, fams: fams}
	b := binder{fams: fams}
	u.shared = sharedMetrics{
		httpChat:    b.counter("", "http_requests_total", "handler", "/v1/chat/completions", "status", "2xx"),
		httpChatDur: b.hist("", "http_request_duration_seconds", "handler", "/v1/chat/completions"),
		httpHighr:   b.hist("", "http_request_duration_highr_seconds"),
		httpRespSz:  b.summary("", "http_response_size_bytes", "handler", "/v1/chat/completions"),
		httpReqSz:   b.summary("", "http_request_size_bytes", "handler", "/v1/chat/completions"),
		cpu:         b.counter("", "process_cpu_seconds_total"),
	}
	var gate *admissionGate
	if capped {
		gate = &admissionGate{
			rejected: b.counter("", admissionRejections, "reason", "max_num_queued_reqs"),
			http503:  b.counter("", "http_requests_total", "handler", "/v1/chat/completions", "status", "5xx"),
		}
	}
	for i := range n {
		e := newEngine(i, opts.Seed, &u.shared, sc)
		e.m = bindEngine(&b, strconv.Itoa(i))
		e.routed = n > 1
		e.gate = gate
		u.engines = append(u.engines, e)
	}
	if gate != nil {
		gate.engines = u.engines
	}
	if b.err != nil {
		return nil, b.err
	}
	u.last = u.now()
	u.simT = warmUp
	u.run(u.simT)
	return u, nil
}

// run brings every engine to simulated time until. With several engines it
// runs them in step and hands each arrival to the least loaded one, as
// vLLM's data-parallel balancer does: each engine's own arrival stream is
// one share of the inflow, and only where a request lands is balanced.
func (u *Upstream) run(until float64) {
	if len(u.engines) > 1 {
		for {
			src := u.engines[0]
			for _, e := range u.engines[1:] {
				if e.nextArrival < src.nextArrival {
					src = e
				}
			}
			at := src.nextArrival
			if at > until {
				break
			}
			for _, e := range u.engines {
				e.advance(at)
			}
			dst := src
			for _, e := range u.engines {
				if e.score() < dst.score() {
					dst = e
				}
			}
			r := src.newRequest(at)
			src.nextArrival += src.gap()
			dst.inbox = append(dst.inbox, r)
		}
	}
	for _, e := range u.engines {
		e.advance(until)
	}
}

// advance brings the simulation up to the clock. Callers hold u.mu.
func (u *Upstream) advance() {
	now := u.now()
	d := now.Sub(u.last)
	if d <= 0 {
		return
	}
	u.last = now
	d = min(d, maxCatchUp)
	u.simT += d.Seconds()
	u.run(u.simT)
	u.shared.cpu.add(d.Seconds() * (0.3 + 0.6*float64(len(u.engines))))
}

// Page advances the simulation to the current time and returns the page
// ServeHTTP would write, in text format 0.0.4.
func (u *Upstream) Page() []byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.advance()
	b := exposition.AppendText(make([]byte, 0, u.lastLen+1024), u.fams)
	u.lastLen = len(b)
	return b
}

// Restart behaves as a restart of the vLLM server would: every counter,
// histogram and summary drops to zero, the requests in flight are lost, and
// the _created series and process_start_time_seconds take the restart time.
func (u *Upstream) Restart() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.advance()
	start := float64(u.last.UnixNano()) / 1e9
	types := make(map[string]model.MetricType, len(u.fams))
	for i := range u.fams {
		types[u.fams[i].Name] = u.fams[i].Type
	}
	for i := range u.fams {
		f := &u.fams[i]
		switch {
		case f.Type == model.MetricTypeCounter || f.Type == model.MetricTypeHistogram || f.Type == model.MetricTypeSummary:
			for j := range f.Samples {
				f.Samples[j].Value = 0
			}
		case f.Name == "process_start_time_seconds" || isCreated(f, types):
			for j := range f.Samples {
				f.Samples[j].Value = start
			}
		}
	}
	for _, e := range u.engines {
		e.restart()
	}
}

// isCreated reports whether f is the _created gauge family of a counter,
// histogram or summary on the same page.
func isCreated(f *exposition.Family, types map[string]model.MetricType) bool {
	base, ok := strings.CutSuffix(f.Name, "_created")
	if !ok || f.Type == model.MetricTypeCounter {
		return false
	}
	return types[base+"_total"] == model.MetricTypeCounter || types[base] == model.MetricTypeCounter ||
		types[base] == model.MetricTypeHistogram || types[base] == model.MetricTypeSummary
}

// admissionRejections is vLLM's counter of requests refused at admission
// (v0.29 on, with --max-num-queued-reqs or --max-num-queued-tokens), which
// the dump predates.
const admissionRejections = "vllm:admission_rejections_total"

// addAdmissionFamilies adds to the dump what a server with admission
// control prints beside it: the rejections counter, per model and reason
// without engine (name, labels and HELP from vLLM's v0.32 metrics
// documentation), and the API server's count of the HTTP 503 answers.
func addAdmissionFamilies(fams []exposition.Family) []exposition.Family {
	for i := range fams {
		if fams[i].Name == "http_requests_total" {
			fams[i].Samples = append(fams[i].Samples, exposition.Sample{
				Labels: labels.FromStrings(model.MetricNameLabel, "http_requests_total", "handler", "/v1/chat/completions", "method", "POST", "status", "5xx")})
		}
	}
	return append(fams, exposition.Family{
		Name: admissionRejections, Type: model.MetricTypeCounter, Help: "Number of admission attempts rejected.",
		Samples: []exposition.Sample{{Labels: labels.FromStrings(model.MetricNameLabel, admissionRejections, "model_name", "TinyLlama", "reason", "max_num_queued_reqs")}},
	})
}

// replicateEngines repeats every sample labelled engine="0" for engines
// "0".."n-1". Within a family, the engine copies take the place of the
// original engine samples, one engine after another.
func replicateEngines(fams []exposition.Family, n int) []exposition.Family {
	var lb labels.Builder
	for i := range fams {
		f := &fams[i]
		var before, eng, after []exposition.Sample
		for _, s := range f.Samples {
			switch {
			case s.Labels.Get("engine") == "0":
				eng = append(eng, s)
			case len(eng) == 0:
				before = append(before, s)
			default:
				after = append(after, s)
			}
		}
		out := make([]exposition.Sample, 0, len(before)+n*len(eng)+len(after))
		out = append(out, before...)
		for k := range n {
			for _, s := range eng {
				if k > 0 {
					lb.Reset(s.Labels)
					lb.Set("engine", strconv.Itoa(k))
					s.Labels = lb.Labels()
				}
				out = append(out, s)
			}
		}
		f.Samples = append(out, after...)
	}
	return fams
}

// counter is one counter (or any cumulative value) of the page; the zero
// value, for a series the page lacks, ignores additions.
type counter struct{ p *float64 }

func (c counter) add(v float64) {
	if c.p != nil {
		*c.p += v
	}
}

type gauge struct{ p *float64 }

func (g gauge) set(v float64) {
	if g.p != nil {
		*g.p = v
	}
}

// hist is one classic histogram series: its cumulative buckets in order of
// upper bound, its _sum and _count. A nil *hist ignores observations.
type hist struct {
	les        []float64
	buckets    []*float64
	sum, count *float64
}

// observe adds w observations of value v.
func (h *hist) observe(v, w float64) {
	if h == nil || w == 0 {
		return
	}
	i, _ := slices.BinarySearch(h.les, v)
	for ; i < len(h.buckets); i++ {
		*h.buckets[i] += w
	}
	*h.sum += v * w
	*h.count += w
}

// summary is a summary series without quantiles (_sum and _count).
type summary struct{ sum, count counter }

func (s summary) observe(v float64) {
	s.sum.add(v)
	s.count.add(1)
}

// binder finds the series of the page that the simulation writes to.
type binder struct {
	fams []exposition.Family
	err  error
}

// find returns the samples named name whose engine label is engine and whose
// labels match the name/value pairs kv.
func (b *binder) find(engine, name string, kv ...string) []*exposition.Sample {
	var out []*exposition.Sample
	for i := range b.fams {
		f := &b.fams[i]
		if !strings.HasPrefix(name, f.Name) {
			continue
		}
	samples:
		for j := range f.Samples {
			s := &f.Samples[j]
			if s.Name() != name || s.Labels.Get("engine") != engine {
				continue
			}
			for k := 0; k+1 < len(kv); k += 2 {
				if s.Labels.Get(kv[k]) != kv[k+1] {
					continue samples
				}
			}
			out = append(out, s)
		}
	}
	return out
}

func (b *binder) one(engine, name string, kv ...string) *float64 {
	s := b.find(engine, name, kv...)
	switch len(s) {
	case 0:
		return nil
	case 1:
		return &s[0].Value
	}
	if b.err == nil {
		b.err = fmt.Errorf("demo: %d series match %s%v for engine %q", len(s), name, kv, engine)
	}
	return nil
}

func (b *binder) counter(engine, name string, kv ...string) counter {
	return counter{b.one(engine, name, kv...)}
}

func (b *binder) gauge(engine, name string, kv ...string) gauge {
	return gauge{b.one(engine, name, kv...)}
}

func (b *binder) summary(engine, name string, kv ...string) summary {
	return summary{b.counter(engine, name+"_sum", kv...), b.counter(engine, name+"_count", kv...)}
}

func (b *binder) hist(engine, name string, kv ...string) *hist {
	sum, count := b.one(engine, name+"_sum", kv...), b.one(engine, name+"_count", kv...)
	bk := b.find(engine, name+"_bucket", kv...)
	if sum == nil || count == nil || len(bk) == 0 {
		return nil
	}
	slices.SortStableFunc(bk, func(x, y *exposition.Sample) int {
		return compareLe(x.Labels.Get(model.BucketLabel), y.Labels.Get(model.BucketLabel))
	})
	h := &hist{sum: sum, count: count}
	for _, s := range bk {
		le, err := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
		if err != nil {
			if b.err == nil {
				b.err = fmt.Errorf("demo: %s: bad le: %w", name, err)
			}
			return nil
		}
		if len(h.les) > 0 && le == h.les[len(h.les)-1] {
			continue
		}
		h.les = append(h.les, le)
		h.buckets = append(h.buckets, &s.Value)
	}
	return h
}

func compareLe(a, b string) int {
	x, _ := strconv.ParseFloat(a, 64)
	y, _ := strconv.ParseFloat(b, 64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// sharedMetrics are the series of the API server process, shared by all
// engines.
type sharedMetrics struct {
	httpChat    counter
	httpChatDur *hist
	httpHighr   *hist
	httpRespSz  summary
	httpReqSz   summary
	cpu         counter
}

// engineMetrics are the series of one engine.
type engineMetrics struct {
	running, waiting, kvUsage gauge

	promptTokens, genTokens, preemptions       counter
	pcQueries, pcHits, extQueries, extHits     counter
	cached, recomputed                         counter
	srcCompute, srcCacheHit, srcExternal       counter
	success                                    map[string]counter
	ttft, itl, tpot, e2e                       *hist
	queue, inference, prefill, decode          *hist
	promptLen, genLen, maxGen, paramsN, maxTok *hist
	iterTokens, kvComputed                     *hist
	nixlXfer, nixlPost, nixlBytes, nixlDesc    *hist
}

func bindEngine(b *binder, eng string) engineMetrics {
	src := func(s string) counter { return b.counter(eng, "vllm:prompt_tokens_by_source_total", "source", s) }
	m := engineMetrics{
		running:      b.gauge(eng, "vllm:num_requests_running"),
		waiting:      b.gauge(eng, "vllm:num_requests_waiting"),
		kvUsage:      b.gauge(eng, "vllm:kv_cache_usage_perc"),
		promptTokens: b.counter(eng, "vllm:prompt_tokens_total"),
		genTokens:    b.counter(eng, "vllm:generation_tokens_total"),
		preemptions:  b.counter(eng, "vllm:num_preemptions_total"),
		pcQueries:    b.counter(eng, "vllm:prefix_cache_queries_total"),
		pcHits:       b.counter(eng, "vllm:prefix_cache_hits_total"),
		extQueries:   b.counter(eng, "vllm:external_prefix_cache_queries_total"),
		extHits:      b.counter(eng, "vllm:external_prefix_cache_hits_total"),
		cached:       b.counter(eng, "vllm:prompt_tokens_cached_total"),
		recomputed:   b.counter(eng, "vllm:prompt_tokens_recomputed_total"),
		srcCompute:   src("local_compute"),
		srcCacheHit:  src("local_cache_hit"),
		srcExternal:  src("external_kv_transfer"),
		success:      map[string]counter{},
		ttft:         b.hist(eng, "vllm:time_to_first_token_seconds"),
		itl:          b.hist(eng, "vllm:inter_token_latency_seconds"),
		tpot:         b.hist(eng, "vllm:request_time_per_output_token_seconds"),
		e2e:          b.hist(eng, "vllm:e2e_request_latency_seconds"),
		queue:        b.hist(eng, "vllm:request_queue_time_seconds"),
		inference:    b.hist(eng, "vllm:request_inference_time_seconds"),
		prefill:      b.hist(eng, "vllm:request_prefill_time_seconds"),
		decode:       b.hist(eng, "vllm:request_decode_time_seconds"),
		promptLen:    b.hist(eng, "vllm:request_prompt_tokens"),
		genLen:       b.hist(eng, "vllm:request_generation_tokens"),
		maxGen:       b.hist(eng, "vllm:request_max_num_generation_tokens"),
		paramsN:      b.hist(eng, "vllm:request_params_n"),
		maxTok:       b.hist(eng, "vllm:request_params_max_tokens"),
		iterTokens:   b.hist(eng, "vllm:iteration_tokens_total"),
		kvComputed:   b.hist(eng, "vllm:request_prefill_kv_computed_tokens"),
		nixlXfer:     b.hist(eng, "vllm:nixl_xfer_time_seconds"),
		nixlPost:     b.hist(eng, "vllm:nixl_post_time_seconds"),
		nixlBytes:    b.hist(eng, "vllm:nixl_bytes_transferred"),
		nixlDesc:     b.hist(eng, "vllm:nixl_num_descriptors"),
	}
	for _, r := range []string{"stop", "length", "abort", "error", "repetition"} {
		m.success[r] = b.counter(eng, "vllm:request_success_total", "finished_reason", r)
	}
	return m
}
