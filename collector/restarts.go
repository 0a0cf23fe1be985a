package collector

import (
	"maps"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// restartLog remembers when the history last found upstream series
// restarted by what the page announced (a _created time or the process
// start time moved past the previous scrape), for readers that date
// series (Published.RestartedAt). A published log is never changed: an
// announcement, rare, makes a new one.
type restartLog struct {
	// process is the last scrape at which process_start_time_seconds said
	// every upstream counter restarted.
	process time.Time
	// series holds the last scrape at which each series' _created time
	// said it restarted, by the hash of its labels (with __name__).
	series map[uint64]time.Time
}

// forgetRestartsAfter bounds the series a restartLog keeps: a reader
// that has not asked for an hour has no use for older restarts.
const forgetRestartsAfter = time.Hour

// with returns the log with this scrape's announcements (at now) added,
// l itself when there are none.
func (l *restartLog) with(now time.Time, process bool, series []labels.Labels) *restartLog {
	if !process && len(series) == 0 {
		return l
	}
	out := &restartLog{series: map[uint64]time.Time{}}
	if l != nil {
		out.process = l.process
		maps.Copy(out.series, l.series)
		maps.DeleteFunc(out.series, func(_ uint64, at time.Time) bool { return now.Sub(at) > forgetRestartsAfter })
	}
	if process {
		out.process = now
	}
	for _, s := range series {
		out.series[s.Hash()] = now
	}
	return out
}

// Published is one page of a published snapshot, for readers that take
// its families rather than its bytes (the OTLP push).
type Published struct {
	Families []exposition.Family
	// At is when the snapshot was published; it moves with every publish.
	At       time.Time
	restarts *restartLog
	upstream map[string]bool // the names of the families from the upstream's page
}

// RestartedAt returns the last scrape at which the history found the
// series of labels l (with __name__, as the page serves it; a histogram's
// by its _count series) of family restarted by an announcement of the
// upstream's page, the zero time when it never did or family is not the
// upstream's. A restart whose value went down need not be announced:
// readers see that themselves.
func (p *Published) RestartedAt(family string, l labels.Labels) time.Time {
	if p.restarts == nil {
		return time.Time{}
	}
	at := p.restarts.series[l.Hash()]
	if p.upstream[family] && p.restarts.process.After(at) {
		at = p.restarts.process
	}
	return at
}
