package serve

import (
	"testing"
	"time"

	fixturepages "github.com/fos-study/vllm-normalizer/internal/fixtures"
)

// idleGzip resets the idle compressors to none, with gzIdleFor set to d
// for the test.
func idleGzip(t *testing.T, d time.Duration) {
	reset := func() {
		gzMu.Lock()
		defer gzMu.Unlock()
		if gzTimer != nil {
			gzTimer.Stop()
		}
		gzIdle, gzTimer = nil, nil
	}
	was := gzIdleFor
	reset()
	gzIdleFor = d
	t.Cleanup(func() { reset(); gzIdleFor = was })
}

// TestCompressorReused: the compressor the last page put back compresses
// the next one (building one allocates ~0.8 MB).
func TestCompressorReused(t *testing.T) {
	idleGzip(t, time.Hour)
	c := getGzip()
	putGzip(c)
	if got := getGzip(); got != c {
		t.Error("the next page built a compressor though one was idle")
	}
}

// TestIdleCompressorDropped: a compressor idle for gzIdleFor is dropped,
// so that a page read every 15 s holds none live between reads.
func TestIdleCompressorDropped(t *testing.T) {
	idleGzip(t, 100*time.Millisecond)
	var enc Encoder
	if gz, _ := enc.Prepare(fixturepages.Families(t, "13-"), nil).Gzipped(); len(gz) == 0 {
		t.Fatal("no gzip page")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		gzMu.Lock()
		idle, pending := len(gzIdle), gzTimer != nil
		gzMu.Unlock()
		if idle == 0 && !pending {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d compressors still idle 30 s after a page was compressed, want none after %s", idle, gzIdleFor)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
