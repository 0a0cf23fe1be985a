package serve

import (
	"bytes"
	"compress/gzip"
	"io"
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
		gzIdle, gzTimer, gzPeak = nil, nil, 0
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
	putGzip(getGzip()) // a read: the next one within the hour keeps its compressor
	c := getGzip()
	if c.stateless {
		t.Fatal("a page read right after another was compressed without state")
	}
	putGzip(c)
	got := getGzip()
	defer putGzip(got)
	if got != c {
		t.Error("the next page built a compressor though one was idle")
	}
}

// TestSeldomReadPageCompressedWithoutState: a page read after gzIdleFor
// without a read (Prometheus every 15 s) is compressed without state, so
// that no 0.8 MB compressor is built for it, and decompresses to its text;
// the compressor is not kept.
func TestSeldomReadPageCompressedWithoutState(t *testing.T) {
	idleGzip(t, 50*time.Millisecond)
	gzMu.Lock()
	gzUsed = time.Now().Add(-time.Second)
	gzMu.Unlock()
	c := getGzip()
	if !c.stateless {
		t.Fatal("a page read a second after the last one built a BestSpeed compressor")
	}
	putGzip(c)
	gzMu.Lock()
	idle := len(gzIdle)
	gzMu.Unlock()
	if idle != 0 {
		t.Errorf("%d compressors kept after a stateless one was put back, want 0", idle)
	}
	time.Sleep(60 * time.Millisecond)
	var enc Encoder
	page := enc.Prepare(fixturepages.Families(t, "13-"), nil)
	gz, _ := page.Gzipped()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	text, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if want := page.Text(); !bytes.Equal(text, want) {
		t.Errorf("the stateless gzip page decompresses to %d bytes unlike its text's %d", len(text), len(want))
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

// TestSurplusCompressorDropped: two pages compressed at once leave two
// compressors idle; while pages are then compressed one at a time, the
// second is dropped after gzIdleFor instead of kept (0.8 MB live) for as
// long as pages are read.
func TestSurplusCompressorDropped(t *testing.T) {
	idleGzip(t, time.Second) // reads every 10 ms: all dropped only if the machine stalls for 1 s
	putGzip(getGzip())       // a read: the next ones build BestSpeed compressors
	a, b := getGzip(), getGzip()
	putGzip(a)
	putGzip(b)
	idle := func() int {
		gzMu.Lock()
		defer gzMu.Unlock()
		return len(gzIdle)
	}
	if n := idle(); n != 2 {
		t.Fatalf("%d compressors idle after two were used at once, want 2", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for idle() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d compressors idle while one at a time was used for 30 s, want 1 after %s", idle(), gzIdleFor)
		}
		putGzip(getGzip())
		time.Sleep(10 * time.Millisecond)
	}
	if n := idle(); n != 1 {
		t.Errorf("%d compressors idle while pages are read one at a time, want 1", n)
	}
}
