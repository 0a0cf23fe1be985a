package exposition

import (
	"fmt"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
)

// LabelLimits are Prometheus's per-scrape label limits (label_limit,
// label_name_length_limit, label_value_length_limit), with its semantics:
// __name__ counts as a label and its value (the metric name) as a value,
// lengths are in bytes, 0 means no limit, and one sample over a limit fails
// the whole page.
type LabelLimits struct {
	Labels      int // most labels on one sample, __name__ included
	NameLength  int // longest label name
	ValueLength int // longest label value
}

// Names of the limits as Prometheus's scrape configuration spells them;
// LabelLimitError.Limit is one of them.
const (
	LimitLabels      = "label_limit"
	LimitNameLength  = "label_name_length_limit"
	LimitValueLength = "label_value_length_limit"
)

// LabelLimitError is a sample over one of the LabelLimits.
type LabelLimitError struct {
	Limit  string // LimitLabels, LimitNameLength or LimitValueLength
	Metric string
	Label  string // the offending label; empty for LimitLabels
	Value  string // the offending value; only for LimitValueLength
	Got    int    // number of labels, or length in bytes
	Max    int
}

// Error words the failure as Prometheus's scrape loop does (names and values
// cut to 50 bytes), and says what to do about it.
func (e *LabelLimitError) Error() string {
	var what string
	switch e.Limit {
	case LimitLabels:
		what = fmt.Sprintf("(metric: %.50s, number of labels: %d, limit: %d)", e.Metric, e.Got, e.Max)
	case LimitNameLength:
		what = fmt.Sprintf("(metric: %.50s, label name: %.50s, length: %d, limit: %d)", e.Metric, e.Label, e.Got, e.Max)
	default:
		what = fmt.Sprintf("(metric: %.50s, label name: %.50s, value: %.50q, length: %d, limit: %d)", e.Metric, e.Label, e.Value, e.Got, e.Max)
	}
	return e.Limit + " exceeded " + what + "; the whole page is refused, as Prometheus refuses such a scrape: raise the limit only if this upstream is meant to print such labels"
}

// check returns the first way lset breaks the limits, or nil. It walks the
// labels once; the count is judged first, as Prometheus judges it.
func (lim *LabelLimits) check(lset labels.Labels) error {
	if lim.Labels <= 0 && lim.NameLength <= 0 && lim.ValueLength <= 0 {
		return nil
	}
	n := 0
	var bad *LabelLimitError
	lset.Range(func(l labels.Label) {
		n++
		if bad != nil {
			return
		}
		switch {
		case lim.NameLength > 0 && len(l.Name) > lim.NameLength:
			bad = &LabelLimitError{Limit: LimitNameLength, Label: l.Name, Got: len(l.Name), Max: lim.NameLength}
		case lim.ValueLength > 0 && len(l.Value) > lim.ValueLength:
			bad = &LabelLimitError{Limit: LimitValueLength, Label: l.Name, Value: l.Value, Got: len(l.Value), Max: lim.ValueLength}
		}
	})
	if lim.Labels > 0 && n > lim.Labels {
		bad = &LabelLimitError{Limit: LimitLabels, Got: n, Max: lim.Labels}
	}
	if bad == nil {
		return nil
	}
	bad.Metric = lset.Get(model.MetricNameLabel)
	return bad
}
