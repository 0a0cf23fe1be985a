package window

import (
	"testing"
	"time"
)

// TestStartOf: a series' start is its own _created time, else the
// process start time of a single process, else unknown (two processes).
func TestStartOf(t *testing.T) {
	h := New([]time.Duration{time.Minute}, time.Second, testInputs)
	born := unix(-30)
	h.Observe(at(0), obs{c: []float64{5, 7}, created: []float64{born}, procStart: []float64{unix(-60)}}.page())
	if got := h.StartOf(engineLabels("c_total", 0)); got != born {
		t.Errorf("engine 0 (its own _created): %v, want %v", got, born)
	}
	if got := h.StartOf(engineLabels("c_total", 1)); got != unix(-60) {
		t.Errorf("engine 1 (no _created): %v, want the process start %v", got, unix(-60))
	}
	h.Observe(at(1), obs{c: []float64{6, 8}, procStart: []float64{unix(-60), unix(-50)}}.page())
	if got := h.StartOf(engineLabels("c_total", 1)); got != 0 {
		t.Errorf("two processes, no _created: %v, want 0 (unknown)", got)
	}
}
