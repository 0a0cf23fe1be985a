package diagnosis

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/internal/setting"
)

// given are the default options with every field set, as cmd's flags give
// them.
var given = Options{Window: DefaultWindow, Baseline: DefaultBaseline, MinChange: DefaultMinChange, Interval: time.Second,
	MinRequests: DefaultMinRequests, Significance: DefaultSignificance, MaxIncident: DefaultMaxIncident, BaselineLookback: DefaultBaselineLookback}

// Check reads a 0 as given and refuses it where it is no valid value, while
// New reads a field left 0 as its default: the flags' 0 is a value, a
// library caller's omitted field is not.
func TestOptionsZeroGivenOrLeft(t *testing.T) {
	if err := given.Check(); err != nil {
		t.Fatalf("the defaults, given: %v", err)
	}
	for _, c := range []struct {
		name string
		zero func(*Options)
		want string
		got  func(Options) any
		def  any
	}{
		{"MinRequests", func(o *Options) { o.MinRequests = 0 }, "diagnosis.Options.MinRequests=0 is below 1",
			func(o Options) any { return o.MinRequests }, float64(DefaultMinRequests)},
		{"Significance", func(o *Options) { o.Significance = 0 }, "diagnosis.Options.Significance=0 is not above 0 and below 0.5",
			func(o Options) any { return o.Significance }, DefaultSignificance},
		{"MaxIncident", func(o *Options) { o.MaxIncident = 0 }, "diagnosis.Options.MaxIncident=0s is not longer than the recent window plus the baseline (31m)",
			func(o Options) any { return o.MaxIncident }, DefaultMaxIncident},
		{"BaselineLookback", func(o *Options) { o.BaselineLookback = 0 }, "diagnosis.Options.BaselineLookback=0s is shorter than the baseline (30m)",
			func(o Options) any { return o.BaselineLookback }, DefaultBaselineLookback},
	} {
		opts := given
		c.zero(&opts)
		if err := opts.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s 0, checked: %v, want an error containing %q", c.name, err, c.want)
		}
		d, err := New(opts)
		if err != nil {
			t.Errorf("%s left 0: New refused it: %v", c.name, err)
			continue
		}
		if got := c.got(d.opts); got != c.def {
			t.Errorf("%s left 0: New took %v, want the default %v", c.name, got, c.def)
		}
	}
}

// The value an error offers as the fix is one Check accepts, also where the
// windows are longer than the defaults are meant for.
func TestOptionsFixAccepted(t *testing.T) {
	for _, c := range []struct {
		name string
		opts func(*Options)
		set  func(*Options, time.Duration)
	}{
		{"MaxIncident", func(o *Options) { o.Baseline = 3 * time.Hour }, func(o *Options, v time.Duration) { o.MaxIncident = v }},
		{"MaxIncident", func(o *Options) { o.Window, o.Baseline, o.BaselineLookback = 2*time.Hour, 8*time.Hour, 8*time.Hour },
			func(o *Options, v time.Duration) { o.MaxIncident = v }},
		{"BaselineLookback", func(o *Options) { o.Baseline, o.MaxIncident = 8*time.Hour, 24*time.Hour }, func(o *Options, v time.Duration) { o.BaselineLookback = v }},
		{"BaselineLookback", func(o *Options) { o.BaselineLookback = time.Minute }, func(o *Options, v time.Duration) { o.BaselineLookback = v }},
	} {
		opts := given
		c.opts(&opts)
		var e *setting.Error
		if err := opts.Check(); !errors.As(err, &e) || e.Setting != "diagnosis.Options."+c.name {
			t.Errorf("%+v: %v, want %s refused", opts, err, c.name)
			continue
		}
		_, example, ok := strings.Cut(e.Fix, "such as ")
		v, err := model.ParseDuration(example)
		if !ok || err != nil {
			t.Errorf("%s: the fix %q offers no duration", c.name, e.Fix)
			continue
		}
		c.set(&opts, time.Duration(v))
		if err := opts.Check(); err != nil {
			t.Errorf("%s: %q offered as the fix, then refused: %v", c.name, e, err)
		}
	}
}
