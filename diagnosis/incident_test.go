package diagnosis

import (
	"testing"
	"time"
)

// TestHoldNeedsEvidence: a named cause stays named only while its own
// evidence holds. Requests queue (waiting 6 against 1) for three minutes,
// then the queue is gone while TTFT stays up for another reason (prompts
// 2.5x as long): queueing must clear once the recent window no longer
// shows the queue, within the window and a few evaluations, not be held
// by the three-window hold on data that stopped showing it (issue 30:
// 56-89 % of the false claims were such holds).
func TestHoldNeedsEvidence(t *testing.T) {
	d, err := New(testOpts)
	if err != nil {
		t.Fatal(err)
	}
	p := newPod()
	queue, prompts := healthy, healthy
	queue.waiting, queue.ttft = 6, 0.3
	prompts.prompt, prompts.ttft = 1000, 0.3
	i := 0
	feed := func(n int, s second) (named []bool) {
		for range n {
			fams := d.Observe(t0.Add(time.Duration(i)*time.Second), []Observation{p.tick(s)})
			i++
			named = append(named, values(fams, FamilyCause, "cause")[CauseQueueing] == 1)
		}
		return named
	}
	feed(640, healthy)
	if q := feed(180, queue); !q[len(q)-1] {
		t.Fatal("queueing not named after three minutes of queue")
	}
	q := feed(240, prompts)
	cleared := -1
	for k := len(q) - 1; k >= 0 && !q[k]; k-- {
		cleared = k
	}
	if limit := 60 + 10; cleared < 0 || cleared > limit {
		t.Errorf("queueing cleared %d s after the queue was gone (-1: never), want within the 60 s window and a few evaluations (%d s)", cleared, limit)
	}
}
