package diagnosis

import "testing"

// batchNamedOnITL is an incident that named batch_growth on itl_up at 0,
// with the given reference.
func batchNamedOnITL(ref *stats) incidentState {
	in := incidentState{uncausedSince: -1}
	in.open, in.named, in.start, in.base = true, true, 0, ref
	in.sym[yITL], in.cause[kBatchGrowth] = hysteresis{on: true}, hysteresis{on: true}
	return in
}

// TestBatchResumedOnASymptomItHad: an incident names batch_growth on
// itl_up and ttft_up; its TTFT comes back first, then its steps, and it
// ends 25 s old (10 s windows: over the probation's length), the calm on
// the batch's probation. TTFT rising again at the undivided level with the
// batch's evidence resumes it at once, batch_growth carried: a symptom it
// had, though not one it ended with. One that never named ttft_up is not
// resumed by it. On the bursty simulator's held-out seed 20, TTFT 1.42x at
// p = 0.005 with the batch 2x (p = 0.005) did not resume the incident that
// had named it (batch_growth on seeds 1, 2, 4, 5, 9, 20 and 24: 5.6 -> 4.8,
// 2.7 -> 2.4, 4.6 -> 1.9, 7.0 -> 6.5, 2.7 -> 2.0, 22.0 -> 20.6 and
// 1.5 -> 0.7 % wrong or missing). Fails on main 638a091: the probation knew
// only the symptoms the incident ended with.
func TestBatchResumedOnASymptomItHad(t *testing.T) {
	var ref stats
	const w, b = 10, 50
	quiet := flatEvaluation()
	batch := quiet
	batch.change[sRunning] = ChangeUp
	both, itl, ttft := batch, batch, batch
	both.change[sITL], both.change[sTTFT], both.symptoms[yITL], both.symptoms[yTTFT] = ChangeUp, ChangeUp, true, true
	itl.change[sITL], itl.symptoms[yITL] = ChangeUp, true
	ttft.change[sTTFT], ttft.symptoms[yTTFT] = ChangeUp, true
	for _, c := range []struct {
		name string
		had  *evaluation // the incident's middle evaluation
		want bool
	}{
		{"named on both", &both, true},
		{"named on itl_up alone", &itl, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := batchNamedOnITL(&ref)
			in.sym[yTTFT] = hysteresis{on: c.had.symptoms[yTTFT]}
			in.step(15, w, b, c.had, c.had, c.had, nil, nil, &ref, 0, 0, 1<<60)
			in.step(20, w, b, &itl, &itl, &itl, nil, nil, &ref, 0, 0, 1<<60)
			in.step(25, w, b, &quiet, &quiet, &quiet, nil, nil, &ref, 0, 0, 1<<60)
			if in.open || !in.batched() {
				t.Fatalf("the steps back 25 s into the incident: open %v, on the batch's probation %v; want ended on it", in.open, in.batched())
			}
			in.step(26, w, b, &quiet, &quiet, &ttft, nil, nil, &ref, 0, 0, 1<<60)
			got := in.open && in.named && in.sym[yTTFT].on && in.cause[kBatchGrowth].on
			if got != c.want {
				t.Errorf("TTFT back at the undivided level with the batch's evidence: open %v, named %v, ttft_up %v, batch_growth %v; want resumed at once %v",
					in.open, in.named, in.sym[yTTFT].on, in.cause[kBatchGrowth].on, c.want)
			}
		})
	}
}
