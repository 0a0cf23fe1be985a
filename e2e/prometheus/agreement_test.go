package prometheus_test

import (
	"github.com/fos-study/vllm-normalizer/derive"
	"github.com/fos-study/vllm-normalizer/mapping"

	"fmt"
	"math"
	"net"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/internal/testbin"
)

// Tolerances; docs/agreement.md explains each.
const (
	// Sidecar vs Prometheus. Rates: see agreeRateFor.
	agreeRatio    = 0.01 // relative, ratios and means
	agreeQuantile = 0.05 // fraction of the width of the bucket holding the true quantile
	// Sidecar vs the known truth.
	truthRate     = 0.01  // relative
	truthRatio    = 0.001 // relative
	truthQuantile = 0.001 // fraction of the bucket width
	// Over time (every sidecar value of the last 30 s, every Prometheus
	// rate of the last 30 s, across the upstream reset).
	sidecarOverTime = 0.02 // relative
	// Prometheus's 30s rate over time: agreeRateFor(30s).
)

type checkKind int

const (
	kindRate checkKind = iota
	kindRatio
	kindQuantile
)

func (k checkKind) String() string {
	return [...]string{"rate", "ratio", "quantile"}[k]
}

// scrapeInterval is the sidecar's and Prometheus's scrape interval.
const scrapeInterval = time.Second

// agreeRateFor is the relative tolerance between a sidecar rate and
// Prometheus's rate() over window w. Prometheus stores each sidecar page at
// its own scrape time, up to one interval (plus scrape latency, 10 % here)
// after the sidecar took it; if the two clocks are in phase, a page can be
// seen twice or missed, which moves one end of the range by one interval:
// at most 1.1 intervals over the w-1 interval the points span. A page
// missed right before the upstream reset loses one more interval's
// increase. Hence 2.2 intervals / (w - 1 interval): 7.6 % for 30s, 3.7 %
// for 1m.
func agreeRateFor(w string) float64 {
	d, err := time.ParseDuration(w)
	if err != nil {
		panic(err)
	}
	return 2.2 * scrapeInterval.Seconds() / (d - scrapeInterval).Seconds()
}

// tolerances returns the allowed difference between the sidecar and
// Prometheus over window w, and between the sidecar and the truth.
func (k checkKind) tolerances(w string) (agree, truth float64) {
	switch k {
	case kindRate:
		return agreeRateFor(w), truthRate
	case kindRatio:
		return agreeRatio, truthRatio
	default:
		return agreeQuantile, truthQuantile
	}
}

// check compares one derived gauge (one quantile, one finished_reason) with
// PromQL and with the truth.
type check struct {
	family string // sidecar family
	sel    string // extra matchers selecting one series per group, e.g. `q="0.9"`
	kind   checkKind
	les    []float64 // bucket bounds, quantiles only
	// promql is the equivalent PromQL over the raw series for grouping
	// labels by and range w.
	promql func(by, w string) string
	// rule is the recording rule of deploy/prometheus/recording.yml for
	// the 1m window, per engine.
	rule  string
	truth [3]float64 // engine "0", engine "1", the model (both engines)
}

const rawJob = `job="sidecar"`

func rateQ(metric, sel string) func(by, w string) string {
	return func(by, w string) string {
		return fmt.Sprintf(`sum by (%s) (rate(%s{%s%s}[%s]))`, by, metric, rawJob, sel, w)
	}
}

func ratioQ(num, den string) func(by, w string) string {
	return func(by, w string) string {
		return fmt.Sprintf(`sum by (%s) (increase(%s{%s}[%s])) / sum by (%s) (increase(%s{%s}[%s]))`,
			by, num, rawJob, w, by, den, rawJob, w)
	}
}

func meanQ(hist string) func(by, w string) string { return ratioQ(hist+"_sum", hist+"_count") }

func quantileQ(hist, q string) func(by, w string) string {
	return func(by, w string) string {
		return fmt.Sprintf(`histogram_quantile(%s, sum by (le, %s) (rate(%s_bucket{%s}[%s])))`, q, by, hist, rawJob, w)
	}
}

// ttftQueueQ is the sidecar's definition: queue mean / (queue mean +
// prefill mean).
func ttftQueueQ(by, w string) string {
	q := meanQ("vllm:request_queue_time_seconds")(by, w)
	p := meanQ("vllm:request_prefill_time_seconds")(by, w)
	return fmt.Sprintf("(%s) / ((%s) + (%s))", q, q, p)
}

func histLes(name string) []float64 {
	for _, h := range truthHists {
		if h.name == name {
			return h.les
		}
	}
	panic("no histogram " + name)
}

// agreementChecks lists every derived gauge with its PromQL equivalent and
// its true value, worked out by hand from truthCounters and truthHists:
// engine 0, engine 1, model-wide (both engines' series summed).
func agreementChecks() []check {
	cs := []check{
		{family: "vllm_derived_preemptions_per_second", kind: kindRate,
			promql: rateQ("vllm:num_preemptions_total", ""), rule: "vllm:derived_preemptions_per_second:rate1m",
			truth: [3]float64{0.5, 0.25, 0.75}},
		{family: "vllm_derived_prompt_tokens_per_second", kind: kindRate,
			promql: rateQ("vllm:prompt_tokens_total", ""), rule: "vllm:derived_prompt_tokens_per_second:rate1m",
			truth: [3]float64{300, 500, 800}},
		{family: "vllm_derived_generation_tokens_per_second", kind: kindRate,
			promql: rateQ("vllm:generation_tokens_total", ""), rule: "vllm:derived_generation_tokens_per_second:rate1m",
			truth: [3]float64{150, 100, 250}},
		{family: "vllm_derived_requests_per_second", sel: `finished_reason="stop"`, kind: kindRate,
			promql: rateQ("vllm:request_success_total", `,finished_reason="stop"`), rule: "vllm:derived_requests_per_second:rate1m",
			truth: [3]float64{2, 1, 3}},
		{family: "vllm_derived_requests_per_second", sel: `finished_reason="length"`, kind: kindRate,
			promql: rateQ("vllm:request_success_total", `,finished_reason="length"`), rule: "vllm:derived_requests_per_second:rate1m",
			truth: [3]float64{1, 0.5, 1.5}},
		// 120/300, 300/500, 420/800.
		{family: "vllm_derived_prefix_cache_hit_ratio", kind: kindRatio,
			promql: ratioQ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"), rule: "vllm:derived_prefix_cache_hit_ratio:ratio1m",
			truth: [3]float64{0.4, 0.6, 0.525}},
		// 25/100, 20/200, 45/300.
		{family: "vllm_derived_external_prefix_cache_hit_ratio", kind: kindRatio,
			promql: ratioQ("vllm:external_prefix_cache_hits_total", "vllm:external_prefix_cache_queries_total"), rule: "vllm:derived_external_prefix_cache_hit_ratio:ratio1m",
			truth: [3]float64{0.25, 0.1, 0.15}},
		// 0.3/3, 0.6/1.5, 0.9/4.5.
		{family: "vllm_derived_queue_time_mean_seconds", kind: kindRatio,
			promql: meanQ("vllm:request_queue_time_seconds"), rule: "vllm:derived_queue_time_mean_seconds:mean1m",
			truth: [3]float64{0.1, 0.4, 0.2}},
		// 0.9/3, 0.9/1.5, 1.8/4.5.
		{family: "vllm_derived_prefill_time_mean_seconds", kind: kindRatio,
			promql: meanQ("vllm:request_prefill_time_seconds"), rule: "vllm:derived_prefill_time_mean_seconds:mean1m",
			truth: [3]float64{0.3, 0.6, 0.4}},
		// 6/3, 6/1.5, 12/4.5.
		{family: "vllm_derived_decode_time_mean_seconds", kind: kindRatio,
			promql: meanQ("vllm:request_decode_time_seconds"), rule: "vllm:derived_decode_time_mean_seconds:mean1m",
			truth: [3]float64{2, 4, 12.0 / 4.5}},
		// 0.1/(0.1+0.3), 0.4/(0.4+0.6), 0.2/(0.2+0.4). The upstream's TTFT
		// mean is queue+prefill (0.4, 1.0, 0.6), so the recording rule's
		// queue/TTFT form has the same truth.
		{family: "vllm_derived_ttft_queue_ratio", kind: kindRatio,
			promql: ttftQueueQ, rule: "vllm:derived_ttft_queue_ratio:ratio1m",
			truth: [3]float64{0.25, 0.4, 1.0 / 3}},
		// 300/3, 500/1.5, 800/4.5.
		{family: "vllm_derived_prompt_tokens_mean", kind: kindRatio,
			promql: meanQ("vllm:request_prompt_tokens"), rule: "vllm:derived_prompt_tokens_mean:mean1m",
			truth: [3]float64{100, 500 / 1.5, 800 / 4.5}},
		// 150/3, 100/1.5, 250/4.5.
		{family: "vllm_derived_generation_tokens_mean", kind: kindRatio,
			promql: meanQ("vllm:request_generation_tokens"), rule: "vllm:derived_generation_tokens_mean:mean1m",
			truth: [3]float64{50, 100 / 1.5, 250 / 4.5}},
	}
	// Quantiles by hand (rank = q * count; the bucket whose cumulative
	// count first reaches the rank; linear interpolation inside it; the
	// +Inf bucket gives the highest finite bound). Per-second cumulative
	// counts: see truthHists; the model's are the sums.
	quantiles := []struct {
		family, hist string
		truth        [3][3]float64 // [q0.5, q0.9, q0.99] per engine 0, 1, model
	}{
		// TTFT e0 cum 0.3,1.2,2.4,2.85,3,3:
		//   q.5 rank 1.5: 0.25+0.25*(1.5-1.2)/1.2 = 0.3125
		//   q.9 rank 2.7: 0.5+0.5*(2.7-2.4)/0.45 = 0.8333..
		//   q.99 rank 2.97: 1+1.5*(2.97-2.85)/0.15 = 2.2
		// e1 cum 0.05,0.15,0.3,0.9,1.4,1.5:
		//   q.5 rank 0.75: 0.5+0.5*(0.75-0.3)/0.6 = 0.875
		//   q.9 rank 1.35: 1+1.5*(1.35-0.9)/0.5 = 2.35
		//   q.99 rank 1.485 > 1.4: +Inf bucket, 2.5
		// model cum 0.35,1.35,2.7,3.75,4.4,4.5:
		//   q.5 rank 2.25: 0.25+0.25*(2.25-1.35)/1.35 = 0.41666..
		//   q.9 rank 4.05: 1+1.5*(4.05-3.75)/0.65 = 1.6923..
		//   q.99 rank 4.455 > 4.4: 2.5
		{"vllm_derived_ttft_seconds", "vllm:time_to_first_token_seconds", [3][3]float64{
			{0.3125, 0.5 + 0.5*0.3/0.45, 2.2}, {0.875, 2.35, 2.5}, {0.25 + 0.25*0.9/1.35, 1 + 1.5*0.3/0.65, 2.5}}},
		// ITL e0 cum 40,100,140,150,150:
		//   q.5 rank 75: 0.01+0.015*35/60 = 0.01875
		//   q.9 rank 135: 0.025+0.025*35/40 = 0.046875
		//   q.99 rank 148.5: 0.05+0.05*8.5/10 = 0.0925
		// e1 cum 0,10,60,92,100:
		//   q.5 rank 50: 0.025+0.025*40/50 = 0.045
		//   q.9 rank 90: 0.05+0.05*30/32 = 0.096875
		//   q.99 rank 99 > 92: 0.1
		// model cum 40,110,200,242,250:
		//   q.5 rank 125: 0.025+0.025*15/90 = 0.02916..
		//   q.9 rank 225: 0.05+0.05*25/42 = 0.07976..
		//   q.99 rank 247.5 > 242: 0.1
		{"vllm_derived_inter_token_latency_seconds", "vllm:inter_token_latency_seconds", [3][3]float64{
			{0.01875, 0.046875, 0.0925}, {0.045, 0.096875, 0.1}, {0.025 + 0.025*15/90, 0.05 + 0.05*25/42, 0.1}}},
		// E2E e0 cum 0.6,1.2,2.4,3,3:
		//   q.5 rank 1.5: 2.5+2.5*0.3/1.2 = 3.125
		//   q.9 rank 2.7: 5+5*0.3/0.6 = 7.5
		//   q.99 rank 2.97: 5+5*0.57/0.6 = 9.75
		// e1 cum 0.15,0.45,0.8,1.2,1.5:
		//   q.5 rank 0.75: 2.5+2.5*0.3/0.35 = 4.6428..
		//   q.9 rank 1.35 > 1.2: 10; q.99 likewise 10
		// model cum 0.75,1.65,3.2,4.2,4.5:
		//   q.5 rank 2.25: 2.5+2.5*0.6/1.55 = 3.4677..
		//   q.9 rank 4.05: 5+5*0.85/1 = 9.25
		//   q.99 rank 4.455 > 4.2: 10
		{"vllm_derived_e2e_latency_seconds", "vllm:e2e_request_latency_seconds", [3][3]float64{
			{3.125, 7.5, 9.75}, {2.5 + 2.5*0.3/0.35, 10, 10}, {2.5 + 2.5*0.6/1.55, 9.25, 10}}},
	}
	ruleName := map[string]string{
		"vllm_derived_ttft_seconds":                "vllm:derived_ttft_seconds:histogram_quantile1m",
		"vllm_derived_inter_token_latency_seconds": "vllm:derived_inter_token_latency_seconds:histogram_quantile1m",
		"vllm_derived_e2e_latency_seconds":         "vllm:derived_e2e_latency_seconds:histogram_quantile1m",
	}
	for _, qf := range quantiles {
		for qi, q := range []string{"0.5", "0.9", "0.99"} {
			cs = append(cs, check{
				family: qf.family, sel: fmt.Sprintf(`q=%q`, q), kind: kindQuantile,
				les: histLes(qf.hist), promql: quantileQ(qf.hist, q), rule: ruleName[qf.family],
				truth: [3]float64{qf.truth[0][qi], qf.truth[1][qi], qf.truth[2][qi]},
			})
		}
	}
	// Shares of the finished requests: e0 stop 2, length 1, abort 0.5 of
	// 3.5 a second; e1 1, 0.5, 0 of 1.5; the model 3, 1.5, 0.5 of 5.
	for _, r := range []struct {
		reason string
		truth  [3]float64
	}{{"stop", [3]float64{2 / 3.5, 1 / 1.5, 3.0 / 5}}, {"length", [3]float64{1 / 3.5, 0.5 / 1.5, 1.5 / 5}}, {"abort", [3]float64{0.5 / 3.5, 0, 0.5 / 5}}} {
		cs = append(cs, check{family: "vllm_derived_finished_ratio", sel: fmt.Sprintf(`finished_reason=%q`, r.reason), kind: kindRatio,
			promql: func(by, w string) string {
				return fmt.Sprintf(`sum by (%s) (increase(vllm:request_success_total{%s,finished_reason=%q}[%s])) / sum by (%s) (increase(vllm:request_success_total{%s}[%s]))`,
					by, rawJob, r.reason, w, by, rawJob, w)
			},
			truth: r.truth})
	}
	// Per-request decode speed: generation rate / mean running, per engine
	// 150/4, 100/5; the model (150+100)/(4+5), a ratio of sums.
	cs = append(cs, check{family: "vllm_derived_generation_tokens_per_second_per_request", kind: kindRate,
		promql: func(by, w string) string {
			return fmt.Sprintf(`sum by (%s) (rate(vllm:generation_tokens_total{%s}[%s])) / sum by (%s) (avg_over_time(vllm:num_requests_running{%s}[%s]))`, by, rawJob, w, by, rawJob, w)
		},
		rule:  "vllm:derived_generation_tokens_per_second_per_request:ratio1m",
		truth: [3]float64{37.5, 20, 250.0 / 9}})
	// Prefill, KV transfer and offload (docs/derived.md).
	local := `,source="local_compute"`
	cs = append(cs,
		check{family: "vllm_derived_prefill_tokens_per_second", kind: kindRate,
			promql: rateQ("vllm:prompt_tokens_by_source_total", local), rule: "vllm:derived_prefill_tokens_per_second:rate1m",
			truth: [3]float64{200, 400, 600}},
		// Waiting 0 and 1 × the mean prompt (100; 500/1.5) ÷ the computed
		// rate (200, 400); the model 1 × 800/4.5 ÷ 600.
		check{family: "vllm_derived_prefill_backlog_seconds", kind: kindRate,
			promql: func(by, w string) string {
				return fmt.Sprintf(`sum by (%s) (avg_over_time(vllm:num_requests_waiting{%s}[%s])) * (%s) / (%s)`,
					by, rawJob, w, meanQ("vllm:request_prompt_tokens")(by, w), rateQ("vllm:prompt_tokens_by_source_total", local)(by, w))
			},
			rule: "vllm:derived_prefill_backlog_seconds:ratio1m", truth: [3]float64{0, 500 / 1.5 / 400, 800 / 4.5 / 600}},
		// 0.5/(0.5+8), 1/(1+4), 1.5/(1.5+12).
		check{family: "vllm_derived_kv_transfer_failure_ratio", kind: kindRatio,
			promql: func(by, w string) string {
				f := fmt.Sprintf(`sum by (%s) (increase(vllm:nixl_num_failed_transfers_total{%s}[%s]))`, by, rawJob, w)
				n := fmt.Sprintf(`sum by (%s) (increase(vllm:nixl_xfer_time_seconds_count{%s}[%s]))`, by, rawJob, w)
				return fmt.Sprintf(`%s / (%s + %s)`, f, f, n)
			},
			rule: "vllm:derived_kv_transfer_failure_ratio:ratio1m", truth: [3]float64{0.5 / 8.5, 0.2, 1.5 / 13.5}},
		// 3.2e7/0.28, 2e7/0.21, 5.2e7/0.49 bytes a second, per TP rank.
		check{family: "vllm_derived_kv_transfer_bytes_per_second", sel: `per="tp_rank"`, kind: kindRatio,
			promql: ratioQ("vllm:nixl_bytes_transferred_sum", "vllm:nixl_xfer_time_seconds_sum"), rule: "vllm:derived_kv_transfer_bytes_per_second:ratio1m",
			truth: [3]float64{3.2e7 / 0.28, 2e7 / 0.21, 5.2e7 / 0.49}},
		check{family: "vllm_derived_kv_offload_load_bytes_per_second", kind: kindRate,
			promql: rateQ("vllm:kv_offload_load_bytes_total", ""), rule: "vllm:derived_kv_offload_load_bytes_per_second:rate1m",
			truth: [3]float64{1e6, 2e6, 3e6}},
		check{family: "vllm_derived_kv_offload_store_bytes_per_second", kind: kindRate,
			promql: rateQ("vllm:kv_offload_store_bytes_total", ""), rule: "vllm:derived_kv_offload_store_bytes_per_second:rate1m",
			truth: [3]float64{3e6, 1e6, 4e6}},
	)
	// Transfer time: e0 cum 2,6,8,8,8: q.5 rank 4: 0.01+0.04*2/4 = 0.03;
	// q.9 rank 7.2: 0.05+0.05*1.2/2 = 0.08; q.99 rank 7.92: 0.098.
	// e1 cum 0,2,4,4,4: q.5 rank 2: 0.01+0.04*2/2 = 0.05; q.9 rank 3.6:
	// 0.05+0.05*1.6/2 = 0.09; q.99 rank 3.96: 0.099. Model cum 2,8,12,12,12:
	// q.5 rank 6: 0.01+0.04*4/6; q.9 rank 10.8: 0.05+0.05*2.8/4 = 0.085;
	// q.99 rank 11.88: 0.05+0.05*3.88/4 = 0.0985.
	xfer := [3][3]float64{{0.03, 0.08, 0.098}, {0.05, 0.09, 0.099}, {0.01 + 0.04*4.0/6, 0.085, 0.0985}}
	for qi, q := range []string{"0.5", "0.9", "0.99"} {
		cs = append(cs, check{
			family: "vllm_derived_kv_transfer_seconds", sel: fmt.Sprintf(`q=%q`, q), kind: kindQuantile,
			les: histLes("vllm:nixl_xfer_time_seconds"), promql: quantileQ("vllm:nixl_xfer_time_seconds", q),
			rule:  "vllm:derived_kv_transfer_seconds:histogram_quantile1m",
			truth: [3]float64{xfer[0][qi], xfer[1][qi], xfer[2][qi]},
		})
	}
	// SLO attainment (sidecar flags: sloFlags), by hand from the
	// per-second cumulative bucket rates of truthHists, the model's being
	// their sums. On a bound: count(le)/count(+Inf). Inside (a, b]:
	// (c(a) + (c(b)-c(a))*(t-a)/(b-a)) / c(+Inf). The le of the sidecar is
	// printed as Prometheus prints bounds, and so are the bounds the sidecar
	// re-exposes ("1.0", "10.0"; the upstream prints "1", "10").
	for _, a := range []struct {
		slo, hist, le string
		lower, upper  string  // upstream bounds around the target; upper "" = on the bound
		frac          float64 // (t-a)/(b-a)
		rule          string
		truth         [3]float64
	}{
		// TTFT cum e0 .3,1.2,2.4,2.85,3,3; e1 .05,.15,.3,.9,1.4,1.5; model .35,1.35,2.7,3.75,4.4,4.5.
		// <= 0.5: 2.4/3, 0.3/1.5, 2.7/4.5.
		{"ttft", "vllm:time_to_first_token_seconds", "0.5", "0.5", "", 0, "vllm:derived_slo_attainment_ratio:ratio1m", [3]float64{0.8, 0.2, 0.6}},
		// <= 0.7 in (0.5, 1], f = 0.4: (2.4+0.45*0.4)/3 = 0.86; (0.3+0.6*0.4)/1.5 = 0.36; (2.7+1.05*0.4)/4.5.
		{"ttft", "vllm:time_to_first_token_seconds", "0.7", "0.5", "1.0", 0.4, "", [3]float64{0.86, 0.36, 3.12 / 4.5}},
		// TPOT cum e0 1,2,3,3; e1 0,.5,1,1.5; model 1,2.5,4,4.5. <= 0.05: 2/3, 0.5/1.5, 2.5/4.5.
		{"tpot", "vllm:request_time_per_output_token_seconds", "0.05", "0.05", "", 0, "vllm:derived_slo_attainment_ratio:ratio1m", [3]float64{2.0 / 3, 1.0 / 3, 2.5 / 4.5}},
		// <= 0.03 in (0.025, 0.05], f = 0.2: (1+1*0.2)/3 = 0.4; (0+0.5*0.2)/1.5; (1+1.5*0.2)/4.5.
		{"tpot", "vllm:request_time_per_output_token_seconds", "0.03", "0.025", "0.05", 0.2, "", [3]float64{0.4, 0.1 / 1.5, 1.3 / 4.5}},
		// E2E cum e0 .6,1.2,2.4,3,3; e1 .15,.45,.8,1.2,1.5; model .75,1.65,3.2,4.2,4.5. <= 10: 3/3, 1.2/1.5, 4.2/4.5.
		{"e2e", "vllm:e2e_request_latency_seconds", "10.0", "10.0", "", 0, "vllm:derived_slo_attainment_ratio:ratio1m", [3]float64{1, 0.8, 4.2 / 4.5}},
		// <= 3 in (2.5, 5], f = 0.2: (1.2+1.2*0.2)/3 = 0.48; (0.45+0.35*0.2)/1.5; (1.65+1.55*0.2)/4.5.
		{"e2e", "vllm:e2e_request_latency_seconds", "3.0", "2.5", "5.0", 0.2, "", [3]float64{0.48, 0.52 / 1.5, 1.96 / 4.5}},
	} {
		cs = append(cs, check{family: "vllm_derived_slo_attainment_ratio", sel: fmt.Sprintf(`slo=%q,target=%q`, a.slo, a.le), kind: kindRatio,
			promql: func(by, w string) string {
				b := func(le string) string {
					return fmt.Sprintf(`sum by (%s) (rate(%s_bucket{%s,le=%q}[%s]))`, by, a.hist, rawJob, le, w)
				}
				if a.upper == "" {
					return fmt.Sprintf(`%s / %s`, b(a.lower), b("+Inf"))
				}
				return fmt.Sprintf(`(%s * %g + %s * %g) / %s`, b(a.lower), 1-a.frac, b(a.upper), a.frac, b("+Inf"))
			},
			rule: a.rule, truth: a.truth})
	}
	return cs
}

// sloFlags are the sidecar's SLO targets; agreementChecks has their truth.
var sloFlags = []string{"--slo.ttft=500ms", "--slo.ttft=700ms", "--slo.tpot=50ms", "--slo.tpot=30ms", "--slo.e2e=10s", "--slo.e2e=3s"}

// bucketWidth is the width of the bucket (lower, upper] holding v; for v
// beyond the highest finite bound, the width of the highest finite bucket.
func bucketWidth(les []float64, v float64) float64 {
	lower := 0.0
	for i, le := range les {
		if math.IsInf(le, 1) {
			return les[i-1] - lowerOf(les, i-1)
		}
		if v <= le {
			return le - lower
		}
		lower = le
	}
	return les[len(les)-1] - lower
}

func lowerOf(les []float64, i int) float64 {
	if i == 0 {
		return 0
	}
	return les[i-1]
}

// within reports whether got is close enough to want for kind with the
// given tolerance, and the allowed absolute difference.
func within(c check, got, want, tol float64) (bool, float64) {
	var allowed float64
	if c.kind == kindQuantile {
		allowed = tol * bucketWidth(c.les, want)
	} else {
		allowed = tol * math.Abs(want)
	}
	return math.Abs(got-want) <= allowed+1e-12, allowed
}

// byKey indexes samples by the value of label (engine) or "" when label is
// empty; a duplicate key is an error.
func byKey(t *testing.T, what string, res []promSample, label string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range res {
		k := ""
		if label != "" {
			k = s.Metric[label]
		}
		if _, dup := out[k]; dup {
			t.Errorf("%s: more than one series for %s=%q: %v", what, label, k, res)
		}
		out[k] = s.Value
	}
	return out
}

// TestAgreementWithPrometheus is issue 4's proof: the sidecar's derived
// gauges equal what Prometheus computes from the raw series the sidecar
// re-exposes, and both equal the known truth of a deterministic upstream,
// across an upstream counter reset.
func TestAgreementWithPrometheus(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()

	// The sidecar scrapes once per second from its start; the 45th
	// request (~45 s in) restarts the upstream's counters, so the reset is
	// inside both windows when they are compared at ~65 s.
	up := newTruthUpstream(45)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(up)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	// The sidecar starts between launched and ready: the origin of
	// idle-model's idle seconds (checkNowGauges).
	testbin.Build(t)
	// The per-model derived gauges are on the compatibility page, the
	// routing listener's /metrics (/metrics/routing holds only what
	// endpoint pickers read).
	compatAddr := testbin.FreeAddr(t)
	launched := time.Now()
	side := testbin.Start(t, append([]string{
		"--vllm.scrape-uri=" + srv.URL + "/metrics",
		// The timeout is the whole interval: on a busy machine a scrape
		// may take most of it.
		"--vllm.scrape-interval=1s", "--vllm.timeout=1s",
		"--web.routing-listen-address=" + compatAddr,
		"--derive.window=30s", "--derive.window=1m",
	}, sloFlags...)...)
	ready := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", side.Logs())
		}
	})
	root := repoRoot(t)
	prom := startPrometheus(t, promBin, []scrapeJob{
		{Name: "sidecar", Target: side.Addr},
		{Name: "routing", Target: compatAddr},
	}, []string{filepath.Join(root, "deploy", "prometheus", "recording.yml")})

	prom.waitFor(t, `vllm_derived_preemptions_per_second{job="sidecar",window="1m"}`, 20*time.Second)
	prom.waitFor(t, `vllm_derived_preemptions_per_second{job="routing",window="1m"}`, 20*time.Second)
	at := up.evaluationTime(t, time.Now(), 500*time.Millisecond)

	// Both sides saw the reset.
	res := byKey(t, "resets", prom.mustQuery(t, `resets(vllm:num_preemptions_total{job="sidecar"}[2m])`, at), "engine")
	for _, e := range truthEngines {
		if res[e] < 1 {
			t.Errorf("Prometheus saw %v resets of engine %s's preemption counter, want >= 1", res[e], e)
		}
	}

	// Largest deviation seen per kind, in units of the tolerance's base
	// (relative, or fraction of the bucket width), logged for docs/agreement.md.
	type worstSeen struct {
		d    float64
		what string
	}
	worstAgree, worstTruth := map[checkKind]worstSeen{}, map[checkKind]worstSeen{}
	compared := 0
	note := func(worst map[checkKind]worstSeen, c check, what string, got, want float64) {
		_, allowed := within(c, got, want, 1)
		if d := math.Abs(got-want) / allowed; d > worst[c.kind].d {
			worst[c.kind] = worstSeen{d, what}
		}
	}
	for _, w := range []string{"30s", "1m"} {
		for _, c := range agreementChecks() {
			name := c.family
			if c.sel != "" {
				name += "{" + c.sel + "}"
			}
			sel := ""
			if c.sel != "" {
				sel = "," + c.sel
			}
			// Per engine, from the full page; model-wide, from the
			// routing view.
			for _, scope := range []struct {
				job, by, key string
			}{
				{"sidecar", "model_name, engine", "engine"},
				{"routing", "model_name", ""},
			} {
				what := fmt.Sprintf("%s window=%s %s", name, w, scope.job)
				side := byKey(t, what, prom.mustQuery(t, fmt.Sprintf(`%s{job=%q,window=%q%s}`, c.family, scope.job, w, sel), at), scope.key)
				pq := c.promql(scope.by, w)
				ref := byKey(t, what+" PromQL", prom.mustQuery(t, pq, at), scope.key)
				keys := truthEngines
				if scope.key == "" {
					keys = []string{""}
				}
				if len(side) != len(keys) || len(ref) != len(keys) {
					t.Errorf("%s: sidecar has %v, PromQL %q has %v; want one series per %v", what, side, pq, ref, keys)
					continue
				}
				for i, k := range keys {
					truth := c.truth[2]
					if scope.key != "" {
						truth = c.truth[i]
					}
					got, okS := side[k]
					want, okR := ref[k]
					if !okS || !okR {
						t.Errorf("%s engine=%q: missing (sidecar %v, PromQL %v)", what, k, side, ref)
						continue
					}
					agreeTol, truthTol := c.kind.tolerances(w)
					compared++
					note(worstAgree, c, what+" engine="+k, got, want)
					note(worstTruth, c, what+" engine="+k, got, truth)
					if ok, allowed := within(c, got, want, agreeTol); !ok {
						t.Errorf("%s engine=%q: sidecar %g vs Prometheus %g (%s): off by %g, allowed %g (%s)", what, k, got, want, pq, got-want, allowed, c.kind)
					}
					if ok, allowed := within(c, got, truth, truthTol); !ok {
						t.Errorf("%s engine=%q: sidecar %g vs truth %g: off by %g, allowed %g", what, k, got, truth, got-truth, allowed)
					}
					// Prometheus itself against the truth, so a wrong
					// truth cannot hide behind two agreeing sides.
					if ok, allowed := within(c, want, truth, agreeTol); !ok {
						t.Errorf("%s engine=%q: Prometheus %g (%s) vs truth %g: off by %g, allowed %g", what, k, want, pq, truth, want-truth, allowed)
					}
				}
			}
		}
	}

	for _, k := range []checkKind{kindRate, kindRatio, kindQuantile} {
		t.Logf("%s: largest deviation sidecar vs Prometheus %.2g (%s), sidecar vs truth %.2g (%s) (relative, or fraction of the bucket width)",
			k, worstAgree[k].d, worstAgree[k].what, worstTruth[k].d, worstTruth[k].what)
	}
	t.Logf("compared %d derived values with PromQL and the truth", compared)

	// The recording rules of deploy/prometheus/recording.yml (1m group)
	// against the sidecar's window="1m" gauges, per engine.
	for _, c := range agreementChecks() {
		if c.rule == "" {
			continue // no rule: an SLO target between bucket bounds
		}
		sel := ""
		if c.sel != "" {
			sel = "," + c.sel
		}
		what := fmt.Sprintf("recording rule %s{%s}", c.rule, c.sel)
		rule := byKey(t, what, prom.mustQuery(t, fmt.Sprintf(`%s{window="1m"%s}`, c.rule, sel), at), "engine")
		side := byKey(t, what+" sidecar", prom.mustQuery(t, fmt.Sprintf(`%s{job="sidecar",window="1m"%s}`, c.family, sel), at), "engine")
		for i, e := range truthEngines {
			r, ok1 := rule[e]
			s, ok2 := side[e]
			if !ok1 || !ok2 {
				t.Errorf("%s engine=%s: missing (rule %v, sidecar %v)", what, e, rule, side)
				continue
			}
			tol, _ := c.kind.tolerances("1m")
			if ok, allowed := within(c, s, r, tol); !ok {
				t.Errorf("%s engine=%s: rule %g vs sidecar %g, allowed difference %g", what, e, r, s, allowed)
			}
			if ok, allowed := within(c, r, c.truth[i], tol); !ok {
				t.Errorf("%s engine=%s: rule %g vs truth %g, allowed difference %g", what, e, r, c.truth[i], allowed)
			}
		}
	}

	// Over the last 30 s, which hold the reset: every value the sidecar
	// served stayed near the truth (in particular never negative, never a
	// spike), for both windows. Prometheus's own 30s rate is checked the
	// same way over the last 25 s (earlier, its range would reach back
	// before its first scrape); its 1m rate only at the evaluation time.
	for _, c := range agreementChecks()[:6] {
		sel := ""
		if c.sel != "" {
			sel = "," + c.sel
		}
		for _, w := range []string{"30s", "1m"} {
			for _, agg := range []string{"min_over_time", "max_over_time"} {
				q := fmt.Sprintf(`%s(%s{job="sidecar",window=%q%s}[30s])`, agg, c.family, w, sel)
				got := byKey(t, q, prom.mustQuery(t, q, at), "engine")
				for i, e := range truthEngines {
					if ok, allowed := within(c, got[e], c.truth[i], sidecarOverTime); !ok {
						t.Errorf("%s engine=%s = %g, truth %g, allowed difference %g; over time: %s", q, e, got[e], c.truth[i], allowed,
							prom.raw(fmt.Sprintf(`%s{job="sidecar",window=%q%s}[30s]`, c.family, w, sel), at))
					}
				}
				if w != "30s" {
					continue
				}
				pq := fmt.Sprintf(`%s((%s)[25s:1s])`, agg, c.promql("engine", w))
				ref := byKey(t, pq, prom.mustQuery(t, pq, at), "engine")
				for i, e := range truthEngines {
					if ok, allowed := within(c, ref[e], c.truth[i], agreeRateFor(w)); !ok {
						t.Errorf("%s engine=%s = %g, truth %g, allowed difference %g; over time: %s", pq, e, ref[e], c.truth[i], allowed,
							prom.raw(fmt.Sprintf(`(%s)[25s:1s]`, c.promql("engine", w)), at))
					}
				}
			}
		}
	}
	checked := map[string]bool{}
	for _, c := range agreementChecks() {
		checked[c.family] = true
	}
	for _, name := range checkNowGauges(t, prom, at, launched, ready) {
		checked[name] = true
	}
	for _, name := range checkAdmissionGauges(t, prom, at) {
		checked[name] = true
	}
	for name := range checked {
		for _, job := range []string{"sidecar", "routing"} {
			q := fmt.Sprintf(`min_over_time(%s{job=%q}[2m]) < 0`, name, job)
			if neg := prom.mustQuery(t, q, at); len(neg) > 0 {
				t.Errorf("%s was negative at some point: %v", name, neg)
			}
		}
	}

	// Every derived family showed up (catches a family this test forgot).
	fams := prom.mustQuery(t, `count by (__name__) ({__name__=~"vllm_derived_.+",job="sidecar"})`, at)
	var names []string
	for _, s := range fams {
		names = append(names, s.Metric["__name__"])
	}
	sort.Strings(names)
	for _, n := range names {
		if !checked[n] {
			t.Errorf("derived family %s is served but not checked here", n)
		}
	}
	if len(names) != len(checked) {
		t.Errorf("served derived families %s, checked %d", strings.Join(names, ", "), len(checked))
	}
	// And every gauge of derive's spec table is checked here.
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range derive.Specs(cat.Roles()) {
		if !checked[s.Name] {
			t.Errorf("derived gauge %s of the spec table is not checked against Prometheus here", s.Name)
		}
	}
}

// checkNowGauges checks the gauges of the current scrape (no window) at
// at, per engine and per model, against PromQL over the raw series, the
// recording rules and the truth, and returns their names.
//
//   - in flight: running + waiting, 4+0 and 5+1, 10 for the model;
//   - free KV tokens: (1 - usage) * num_gpu_blocks * block_size, the block
//     data read back from the cache_config_info labels Prometheus stored:
//     12000, 16000, 28000 (truthKV);
//   - idle seconds: truth-model always runs requests, so 0 at every scrape;
//     idle-model never did, so the seconds since the sidecar started.
func checkNowGauges(t *testing.T, prom *promServer, at, launched, ready time.Time) []string {
	t.Helper()
	const model = `model_name="truth-model"`
	exact := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) {
			t.Errorf("%s = %g, want %g", what, got, want)
		}
	}
	// In flight.
	inFlight := [3]float64{4, 6, 10}
	byEngine := byKey(t, "in flight", prom.mustQuery(t, `vllm_derived_requests_in_flight{job="sidecar",`+model+`}`, at), "engine")
	raw := byKey(t, "in flight PromQL", prom.mustQuery(t, `sum by (engine) (vllm:num_requests_running{job="sidecar",`+model+`}) + sum by (engine) (vllm:num_requests_waiting{job="sidecar",`+model+`})`, at), "engine")
	rule := byKey(t, "in flight rule", prom.mustQuery(t, `vllm:derived_requests_in_flight:sum{engine!="",`+model+`}`, at), "engine")
	for i, e := range truthEngines {
		exact("vllm_derived_requests_in_flight engine="+e, byEngine[e], inFlight[i])
		exact("running + waiting (PromQL) engine="+e, raw[e], inFlight[i])
		exact("vllm:derived_requests_in_flight:sum engine="+e, rule[e], inFlight[i])
	}
	perModel := byKey(t, "in flight routing", prom.mustQuery(t, `vllm_derived_requests_in_flight{job="routing",`+model+`}`, at), "")
	exact("vllm_derived_requests_in_flight per model", perModel[""], inFlight[2])

	// Free KV tokens, from the block data Prometheus stored.
	cfg := prom.mustQuery(t, `vllm:cache_config_info{job="sidecar"}`, at)
	usage := byKey(t, "KV usage", prom.mustQuery(t, `max by (engine) (vllm:kv_cache_usage_perc{job="sidecar",`+model+`})`, at), "engine")
	free := byKey(t, "free KV tokens", prom.mustQuery(t, `vllm_derived_kv_cache_free_tokens{job="sidecar",`+model+`}`, at), "engine")
	fromProm := 0.0
	for i, e := range truthEngines {
		var blocks, size float64
		for _, s := range cfg {
			if s.Metric["engine"] == e {
				blocks, _ = strconv.ParseFloat(s.Metric["num_gpu_blocks"], 64)
				size, _ = strconv.ParseFloat(s.Metric["block_size"], 64)
			}
		}
		want := (1 - truthKV[i].usage) * float64(truthKV[i].blocks*truthKV[i].blockSize)
		p := (1 - usage[e]) * blocks * size
		fromProm += p
		exact("free KV tokens from Prometheus's series engine="+e, p, want)
		exact("vllm_derived_kv_cache_free_tokens engine="+e, free[e], want)
	}
	perModel = byKey(t, "free KV routing", prom.mustQuery(t, `vllm_derived_kv_cache_free_tokens{job="routing",`+model+`}`, at), "")
	exact("vllm_derived_kv_cache_free_tokens per model", perModel[""], fromProm)
	exact("vllm_derived_kv_cache_free_tokens per model vs truth", perModel[""], 28000)

	// Idle seconds.
	for _, job := range []string{"sidecar", "routing"} {
		q := fmt.Sprintf(`max_over_time(vllm_derived_idle_seconds{job=%q,%s}[40s])`, job, model)
		for _, s := range prom.mustQuery(t, q, at) {
			if s.Value != 0 {
				t.Errorf("%s: %v = %g; truth-model always has requests running, so it is never idle", q, s.Metric, s.Value)
			}
		}
	}
	if busy := prom.mustQuery(t, `min_over_time(vllm:num_requests_running{job="sidecar",`+model+`}[40s]) > 0`, at); len(busy) != 2 {
		t.Errorf("Prometheus's raw series do not show both truth-model engines running for the last 40 s: %v", busy)
	}
	// Idle since the sidecar started, as of the scrape that computed it:
	// the seconds from its start, between launched and ready, to the
	// moment that scrape's request went out, which the same page gives as
	// its end (vllm_normalizer_last_scrape_success_timestamp_seconds) less
	// its duration. Prometheus stores the page's series at one timestamp,
	// so one query time reads them from one page. (The process start time
	// is no origin: client_golang derives it from the kernel's boot time in
	// whole seconds, up to 1 s early; nor is the query time, up to two
	// intervals after the scrape.)
	one := func(q string) float64 {
		t.Helper()
		return prom.one(t, q, at)
	}
	idle := one(`vllm_derived_idle_seconds{job="sidecar",model_name="idle-model"}`)
	sent := one(`vllm_normalizer_last_scrape_success_timestamp_seconds{job="sidecar"}`) - one(`vllm_normalizer_scrape_duration_seconds{job="sidecar"}`)
	unix := func(x time.Time) float64 { return float64(x.UnixNano()) / 1e9 }
	// 1 ms for the printed values' rounding.
	if lo, hi := sent-unix(ready), sent-unix(launched); idle < lo-1e-3 || idle > hi+1e-3 {
		t.Errorf("idle-model: vllm_derived_idle_seconds = %.3f, want between %.3f and %.3f (from the sidecar's start, between launch and ready, to its scrape)", idle, lo, hi)
	}
	procStart := one(`vllm_normalizer_process_start_time_seconds{job="sidecar"}`)
	t.Logf("idle-model: %.3f s idle; since launch to the scrape %.3f s; since the process start time to the query time %.3f s (the old check's truth)",
		idle, sent-unix(launched), unix(at)-procStart)
	// It grows one second per second.
	if d := prom.mustQuery(t, `deriv(vllm_derived_idle_seconds{job="sidecar",model_name="idle-model"}[30s])`, at); len(d) != 1 || math.Abs(d[0].Value-1) > 0.05 {
		t.Errorf("idle-model: deriv(vllm_derived_idle_seconds[30s]) = %v, want 1", d)
	}
	if worked := prom.mustQuery(t, `max_over_time(vllm:num_requests_running{job="sidecar",model_name="idle-model"}[2m]) > 0`, at); len(worked) != 0 {
		t.Errorf("Prometheus saw idle-model running requests: %v", worked)
	}

	// Ranks, per model on both pages: in flight 4 and 6, the busiest over
	// the mean 6/5; KV usage 0.5 - 0.25. idle-model has one engine: none.
	for _, job := range []string{"sidecar", "routing"} {
		imb := byKey(t, "imbalance "+job, prom.mustQuery(t, fmt.Sprintf(`vllm_derived_engine_imbalance_ratio{job=%q}`, job), at), "model_name")
		exact("vllm_derived_engine_imbalance_ratio "+job, imb[truthModel], 1.2)
		spread := byKey(t, "spread "+job, prom.mustQuery(t, fmt.Sprintf(`vllm_derived_kv_cache_usage_spread{job=%q}`, job), at), "model_name")
		exact("vllm_derived_kv_cache_usage_spread "+job, spread[truthModel], 0.25)
		if len(imb) != 1 || len(spread) != 1 {
			t.Errorf("%s: imbalance %v, spread %v; want truth-model only (idle-model has one engine)", job, imb, spread)
		}
	}
	ruleImb := byKey(t, "imbalance rule", prom.mustQuery(t, `vllm:derived_engine_imbalance_ratio:ratio`, at), "model_name")
	exact("vllm:derived_engine_imbalance_ratio:ratio", ruleImb[truthModel], 1.2)
	ruleSpread := byKey(t, "spread rule", prom.mustQuery(t, `vllm:derived_kv_cache_usage_spread:spread`, at), "model_name")
	exact("vllm:derived_kv_cache_usage_spread:spread", ruleSpread[truthModel], 0.25)
	// Deferred share: engine 1's one waiting request is deferred; engine 0
	// has none waiting (absent); the model 1/1.
	def := byKey(t, "deferred", prom.mustQuery(t, `vllm_derived_requests_waiting_deferred_ratio{job="sidecar",`+model+`}`, at), "engine")
	if len(def) != 1 {
		t.Errorf("deferred share per engine %v, want engine 1 only", def)
	}
	exact("vllm_derived_requests_waiting_deferred_ratio engine=1", def["1"], 1)
	defRule := byKey(t, "deferred rule", prom.mustQuery(t, `vllm:derived_requests_waiting_deferred_ratio:ratio{`+model+`}`, at), "engine")
	exact("vllm:derived_requests_waiting_deferred_ratio:ratio engine=1", defRule["1"], 1)
	defModel := byKey(t, "deferred routing", prom.mustQuery(t, `vllm_derived_requests_waiting_deferred_ratio{job="routing",`+model+`}`, at), "")
	exact("vllm_derived_requests_waiting_deferred_ratio per model", defModel[""], 1)
	return []string{"vllm_derived_requests_in_flight", "vllm_derived_kv_cache_free_tokens", "vllm_derived_idle_seconds",
		"vllm_derived_engine_imbalance_ratio", "vllm_derived_kv_cache_usage_spread", "vllm_derived_requests_waiting_deferred_ratio"}
}

// checkAdmissionGauges checks the admission gauges, which are per model on
// both pages (vLLM counts refusals without engine), at at against PromQL
// over the raw series and the truth, for both windows, and returns their
// names:
//   - refusals per second by reason: 3 and 1.5 (truthRejections);
//   - refused share: 4.5 refused against 4.5 started (the TTFT counts, 3
//     and 1.5 a second), 0.5;
//   - at the cap: refusals in the window, 1.
func checkAdmissionGauges(t *testing.T, prom *promServer, at time.Time) []string {
	t.Helper()
	const model = `model_name="truth-model"`
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol*math.Abs(want)+1e-12 {
			t.Errorf("%s = %g, want %g (relative tolerance %g)", what, got, want, tol)
		}
	}
	refused := 0.0
	for _, r := range truthRejections {
		refused += r.rate
	}
	started := 0.0
	for _, h := range truthHists {
		if h.name == "vllm:time_to_first_token_seconds" {
			started = h.cum[0][len(h.les)-1] + h.cum[1][len(h.les)-1]
		}
	}
	for _, w := range []string{"30s", "1m"} {
		rej := fmt.Sprintf(`sum by (model_name) (increase(vllm:admission_rejections_total{%s,%s}[%s]))`, rawJob, model, w)
		ttft := fmt.Sprintf(`sum by (model_name) (increase(vllm:time_to_first_token_seconds_count{%s,%s}[%s]))`, rawJob, model, w)
		for _, job := range []string{"sidecar", "routing"} {
			what := func(name string) string { return fmt.Sprintf("%s window=%s %s", name, w, job) }
			sel := fmt.Sprintf(`{job=%q,%s,window=%q}`, job, model, w)
			byReason := byKey(t, what("refusals"), prom.mustQuery(t, "vllm_derived_admission_rejections_per_second"+sel, at), "reason")
			ref := byKey(t, what("refusals PromQL"), prom.mustQuery(t, fmt.Sprintf(`sum by (reason) (rate(vllm:admission_rejections_total{%s,%s}[%s]))`, rawJob, model, w), at), "reason")
			for _, r := range truthRejections {
				near(what("vllm_derived_admission_rejections_per_second reason="+r.reason)+" vs truth", byReason[r.reason], r.rate, truthRate)
				near(what("vllm_derived_admission_rejections_per_second reason="+r.reason)+" vs Prometheus", byReason[r.reason], ref[r.reason], agreeRateFor(w))
			}
			if len(byReason) != len(truthRejections) {
				t.Errorf("%s: %v, want one series per reason", what("refusals"), byReason)
			}
			for _, name := range []string{"vllm_derived_admission_rejections_per_second", "vllm_derived_admission_rejected_ratio", "vllm_derived_admission_at_cap"} {
				for _, s := range prom.mustQuery(t, name+sel, at) {
					if s.Metric["engine"] != "" {
						t.Errorf("%s has an engine label: %v; refusals are counted per model", what(name), s)
					}
				}
			}
			ratio := byKey(t, what("refused share"), prom.mustQuery(t, "vllm_derived_admission_rejected_ratio"+sel, at), "")
			pq := fmt.Sprintf(`%s / (%s + %s)`, rej, rej, ttft)
			refRatio := byKey(t, what("refused share PromQL"), prom.mustQuery(t, pq, at), "")
			near(what("vllm_derived_admission_rejected_ratio")+" vs truth", ratio[""], refused/(refused+started), truthRatio)
			near(what("vllm_derived_admission_rejected_ratio")+" vs Prometheus "+pq, ratio[""], refRatio[""], agreeRatio)
			atCap := byKey(t, what("at cap"), prom.mustQuery(t, "vllm_derived_admission_at_cap"+sel, at), "")
			refCap := byKey(t, what("at cap PromQL"), prom.mustQuery(t, rej+" > bool 0", at), "")
			if atCap[""] != 1 || refCap[""] != 1 {
				t.Errorf("%s: sidecar %v, PromQL %v; want 1 (refusals in the window)", what("vllm_derived_admission_at_cap"), atCap, refCap)
			}
		}
	}
	return []string{"vllm_derived_admission_rejections_per_second", "vllm_derived_admission_rejected_ratio", "vllm_derived_admission_at_cap"}
}
