package diagnosis

import (
	"testing"
)

// batchGrowth is a batch twice as large (16 running against 8) with every
// inter-token step three times as long: batch_growth on itl_up.
var batchGrowth = func() second {
	s := healthy
	s.running, s.itl = 16, 0.15
	return s
}()

// TestBatchGrowthHeldThroughABurstOfStarts: a named batch_growth stays
// named while the batch is still large when generated tokens per request
// started rise (half the requests get their first token: 2x), as they do
// in every lull of a bursty pod's starts while the batch already admitted
// keeps generating; the same rise, there before the batch grew, still
// keeps batch_growth from being named (longer outputs show in the
// finished requests only as they end). On the bursty simulator the rise cleared batch_growth in 13 to 20
// of the judged polls of each seed. Fails on the code before: it cleared
// 24 s into the lull of starts.
func TestBatchGrowthHeldThroughABurstOfStarts(t *testing.T) {
	fewStarts := batchGrowth
	fewStarts.starts = 2
	f := shiftNamed(t, batchGrowth, 120, CauseBatchGrowth)
	for k := range 60 {
		f.feed(1, fewStarts, nil)
		if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 1 {
			t.Fatalf("%d s into the lull of starts: batch_growth %v (causes %v), want held while the batch is still twice as large", k, got, values(f.fams, FamilyCause, "cause"))
		}
	}
	quiet := healthy
	quiet.starts = 2
	f = newFeeder(t, testOpts)
	f.feed(640, healthy, nil)
	f.feed(60, quiet, nil)
	f.feed(120, fewStarts, nil)
	if got := values(f.fams, FamilyCause, "cause")[CauseBatchGrowth]; got != 0 {
		t.Errorf("batch_growth %v after two minutes of a larger batch with tokens per request started 2x since before it grew, want not named", got)
	}
}
