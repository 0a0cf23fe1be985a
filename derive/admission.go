package derive

import (
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// WithQueuedReqsCap returns a Deriver like d that knows the server's cap
// on waiting + running requests (vLLM's --max-num-queued-reqs, given to
// the sidecar as --upstream.max-num-queued-reqs), for
// vllm_derived_admission_at_cap; 0 means not known.
func (d *Deriver) WithQueuedReqsCap(limit int) *Deriver {
	out := *d
	out.byName = nil // its own scratch: copies may scrape at once
	out.queuedReqsCap = float64(max(limit, 0))
	return &out
}

// admissionRejectedRatio is the refused attempts over all attempts: the
// refused plus those that started (reached their first token).
var admissionRejectedRatio = shareOf(mapping.CounterAdmissionRejections, mapping.CounterTTFTCount)

// admissionAtCap is 1 when the server refused a request in the window or
// its waiting + running stand at the known cap at the window's end, 0
// when it could have shown either and did not; absent when it can show
// neither.
func admissionAtCap(c *windowCalc) {
	a := c.a
	rej := mapping.CounterAdmissionRejections
	run, wait := c.gauge(gaugeRunning), c.gauge(gaugeWaiting)
	capKnown := c.d.queuedReqsCap > 0 && run.meanHas && wait.meanHas
	switch {
	case a.has[rej] && a.inc[rej] > 0:
		c.emit(1)
	case capKnown && run.lastSum+wait.lastSum >= c.d.queuedReqsCap:
		c.emit(1)
	case a.has[rej] || capKnown:
		c.emit(0)
	}
}

// finishedRatio is each finished_reason's share of the requests finished
// in the window.
func finishedRatio(c *windowCalc) {
	cn := mapping.CounterRequestsFinished
	total, ok := c.a.inc[cn], c.a.has[cn]
	if !ok || total == 0 {
		return
	}
	for _, r := range c.split() {
		if r.counter == cn {
			c.emitWith([]labels.Label{{Name: finishedReasonLabel, Value: r.value}}, r.value, r.inc/total)
		}
	}
}
