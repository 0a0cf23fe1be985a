package nhcb

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

func isHistogram(name string) bool {
	return name == "vllm:time_to_first_token_seconds" || name == "vllm:request_queue_time_seconds"
}

func TestNative(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{ // a quantile's input: the aggregation without le, of the histogram
			`histogram_quantile(0.9, sum by (pod, le) (rate(vllm:time_to_first_token_seconds_bucket{pod="a"}[1m])))`,
			`histogram_quantile(0.9, sum by (pod) (rate(vllm:time_to_first_token_seconds{pod="a"}[1m])))`,
		},
		{ // a mean: histogram_sum over histogram_count, offsets kept
			`sum by (pod) (increase(vllm:request_queue_time_seconds_sum[1m] offset 1m)) / sum by (pod) (increase(vllm:request_queue_time_seconds_count[1m] offset 1m))`,
			`sum by (pod) (histogram_sum(increase(vllm:request_queue_time_seconds[1m] offset 1m))) / sum by (pod) (histogram_count(increase(vllm:request_queue_time_seconds[1m] offset 1m)))`,
		},
		{ // the share at or under a target: the count under the bound over the count
			`sum by (pod) (increase(vllm:time_to_first_token_seconds_bucket{le=~"0\\.5"}[5m])) / (sum by (pod) (increase(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[5m])) > 0)`,
			`(histogram_fraction(-Inf, 0.5, sum by (pod) (increase(vllm:time_to_first_token_seconds[5m]))) * histogram_count(sum by (pod) (increase(vllm:time_to_first_token_seconds[5m])))) / (histogram_count(sum by (pod) (increase(vllm:time_to_first_token_seconds[5m]))) > 0)`,
		},
		{ // a spelling per Prometheus version of one bound
			`sum(increase(vllm:time_to_first_token_seconds_bucket{le=~"10|10\\.0"}[5m]))`,
			`(histogram_fraction(-Inf, 10, sum(increase(vllm:time_to_first_token_seconds[5m]))) * histogram_count(sum(increase(vllm:time_to_first_token_seconds[5m]))))`,
		},
	} {
		got, changed, err := Native(c.in, isHistogram)
		if err != nil || !changed || got != c.want {
			t.Errorf("Native(%s)\n got %s (changed %v, %v)\nwant %s", c.in, got, changed, err, c.want)
		}
		if _, err := parser.NewParser(parser.Options{}).ParseExpr(got); err != nil {
			t.Errorf("%s does not parse: %v", got, err)
		}
	}
}

func TestEitherLeavesOthersAlone(t *testing.T) {
	for _, in := range []string{
		`sum by (pod) (rate(vllm:num_preemptions_total[1m]))`,
		`rate(vllm:some_summary_sum[1m]) / rate(vllm:some_summary_count[1m])`, // not a histogram
	} {
		got, err := Either(in, isHistogram)
		if err != nil || got != in {
			t.Errorf("Either(%s) = %s, %v; want it unchanged", in, got, err)
		}
	}
	got, err := Either(`sum(rate(vllm:time_to_first_token_seconds_count[1m]))`, isHistogram)
	if err != nil || !strings.Contains(got, "\nor\n") || !strings.Contains(got, "histogram_count(rate(vllm:time_to_first_token_seconds[1m]))") {
		t.Errorf("Either gave %s, %v; want the classic form or the native one", got, err)
	}
}

func TestNoNativeFormIsAnError(t *testing.T) {
	for _, in := range []string{
		`vllm:time_to_first_token_seconds_bucket`,                // read raw
		`sum(rate(vllm:time_to_first_token_seconds_bucket[1m]))`, // every bound at once
		`sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{le="1"}[1m]))`,
	} {
		if _, _, err := Native(in, isHistogram); err == nil {
			t.Errorf("Native(%s): no error; want one naming the series", in)
		}
	}
}
