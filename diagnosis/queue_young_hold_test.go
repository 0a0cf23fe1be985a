package diagnosis

import (
	"math"
	"testing"
)

// TestQueueLeadReadAgainstTheMeanTTFT: the queue's lead (evaluation.queued)
// reads the Little's-law queue time, a mean wait, against the baseline's
// exact mean TTFT: a wait of 0.07 s on a mean TTFT of 0.074 s would make it
// 1.95 times, and leads TTFT shown at the undivided level; 0.03 s (1.4
// times) leads nothing, nor does 0.07 s where the mean is unknown (read
// against the p90 of 0.18 s: 1.39 times). The bursty simulator, seed 7 at
// 50 %: requests waited 2700 times the reference at p < 0.0001, a mean wait
// of 0.07-0.08 s (the true queue p90 0.21-0.39 s) against a TTFT p90 of
// 0.18 s, and the TTFT read p = 0.002-0.02. Fails on main a0f60fc: the
// wait was read against the p90 and led nothing.
func TestQueueLeadReadAgainstTheMeanTTFT(t *testing.T) {
	const m = 0.25
	for _, c := range []struct {
		name      string
		queueTime float64 // s
		mean      float64 // the baseline's mean TTFT, s (its p90: 0.18 s)
		want      bool
	}{
		{"wait 0.07 s, mean TTFT 0.074 s", 0.07, 0.074, true},
		{"wait 0.03 s, mean TTFT 0.074 s", 0.03, 0.074, false},
		{"wait 0.07 s, the mean unknown", 0.07, math.NaN(), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			recent, base := nanStats(), nanStats()
			base.v[sTTFT], base.v[sTTFTMean] = 0.18, c.mean
			strict := flatEvaluation()
			strict.change[sWaiting] = ChangeUp
			strict.inflowQueueUp, strict.queueTimeUp, strict.inflowQueueShare, strict.queueShare = true, true, 1, m
			strict.queueTime, strict.inflowQueue = c.queueTime, 5
			lenient := strict
			lenient.symptoms[yTTFT] = true
			strict.ledBy(&lenient, &recent, &base, m)
			if strict.queued != c.want || strict.symptoms[yTTFT] != c.want {
				t.Errorf("queued %v, ttft_up %v; want %v", strict.queued, strict.symptoms[yTTFT], c.want)
			}
		})
	}
}

// TestYoungQueueingHeldWhileTheQueueLeads: a named overload younger than
// HoldWindows recent windows whose TTFT is back (its test failed at the
// undivided level) is held by queueing while the queue shows the evidence
// that leads TTFT (evaluation.queued: waiting at the strict level, beyond
// every sub-window, its time alone (1 + m)² times the baseline's mean
// TTFT) and the TTFT stays half way, in log, to the minimum change (as a
// held batch's symptom must): the same waiting without that lead ends it,
// as before, and so does a TTFT back under half way (a wait that does not
// show in the latency explains none: the pod back at a level of its own,
// TestChainedIncidentsReferenceIncidentFreeTime). The bursty
// simulator, seed 7 at 50 %: an overload named at 15m55 ended 2 s later at
// a TTFT p = 0.04 with 1900 times the requests waiting, and the next 4
// polls at a true TTFT 1.7-2.0x named nothing. Fails on main a0f60fc: a
// young incident was never held by its queue.
func TestYoungQueueingHeldWhileTheQueueLeads(t *testing.T) {
	const w, b = 10, 300
	for _, c := range []struct {
		name            string
		queued, halfway bool
		held            bool
	}{
		{"the queue leads TTFT", true, true, true},
		{"requests wait, no lead", false, true, false},
		{"the queue leads, TTFT back under half way", true, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			quiet, queue := flatEvaluation(), flatEvaluation()
			quiet.alpha, quiet.queued = 0.001, c.queued
			queue.queueShare = 0.25 / 4
			queue.change[sWaiting], queue.inflowQueueUp, queue.queueTimeUp, queue.inflowQueueShare = ChangeUp, true, true, 1
			queue.p[sWaiting] = 0.0001
			queue.halfway[yTTFT] = c.halfway
			var ref stats
			start := int64(1000)
			in := incidentState{uncausedSince: -1}
			in.open, in.named, in.start, in.chainStart, in.base = true, true, start, start, &ref
			in.sym[yTTFT], in.cause[kQueueing] = hysteresis{on: true}, hysteresis{on: true}
			in.step(start+4, w, b, &quiet, &quiet, &queue, nil, &ref, &ref, 0, start-w, 1<<60)
			if held := in.open && in.quiet && in.cause[kQueueing].on; held != c.held {
				t.Errorf("4 s into a named overload, TTFT back, %s: held %v (open %v), want %v", c.name, held, in.open, c.held)
			}
		})
	}
}
