package collector

import (
	"compress/gzip"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// prepared is one page, encoded once when published and served as is.
// Its gzip variant is compressed on the first request that accepts gzip,
// once per snapshot: a snapshot nobody reads compressed costs nothing, and
// the scrape cycle never waits for a compressor. The OpenMetrics variant is
// likewise encoded on first demand only: none of the known consumers asks
// for it.
type prepared struct {
	fams []exposition.Family
	text []byte
	// textLen is the Content-Length header value of text.
	textLen []string

	gzPool    *sync.Pool // of *gzip.Writer, shared by the collector's snapshots
	gzOnce    sync.Once
	textGz    []byte
	textGzLen []string

	omOnce sync.Once
	om     []byte
	omGz   []byte
}

type snapshot struct {
	page    *prepared
	routing *prepared
}

// encoder holds what preparing a page reuses from one scrape to the next:
// a pool of gzip writers (a compressor's state is ~1 MB to allocate) and
// the size of the last output, so that each new buffer is allocated once at
// about the right size instead of grown by doubling. The output buffers
// themselves are always fresh: a published snapshot's bytes may still be
// written to a slow client while the next scrape encodes.
type encoder struct {
	gzPool   *sync.Pool
	textHint int
}

func (e *encoder) prepare(fams []exposition.Family) *prepared {
	if e.gzPool == nil {
		e.gzPool = &sync.Pool{New: func() any {
			gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
			return gz
		}}
	}
	p := &prepared{fams: fams, gzPool: e.gzPool}
	p.text = exposition.AppendText(make([]byte, 0, e.textHint), fams)
	e.textHint = len(p.text) + len(p.text)/16 + 512
	p.textLen = []string{strconv.Itoa(len(p.text))}
	return p
}

// gzipped returns the compressed text page, compressing it on first use.
func (p *prepared) gzipped() ([]byte, []string) {
	p.gzOnce.Do(func() {
		gz := p.gzPool.Get().(*gzip.Writer)
		p.textGz = compress(gz, p.text, len(p.text)/6+512)
		p.gzPool.Put(gz)
		p.textGzLen = []string{strconv.Itoa(len(p.textGz))}
	})
	return p.textGz, p.textGzLen
}

func (p *prepared) openMetrics() ([]byte, []byte) {
	p.omOnce.Do(func() {
		p.om = exposition.AppendOpenMetrics(nil, p.fams)
		gz := p.gzPool.Get().(*gzip.Writer)
		p.omGz = compress(gz, p.om, len(p.om)/6+512)
		p.gzPool.Put(gz)
	})
	return p.om, p.omGz
}

// compress gzips b into a new slice of capacity hint (grown if short),
// resetting gz onto it.
func compress(gz *gzip.Writer, b []byte, hint int) []byte {
	out := appendWriter(make([]byte, 0, hint))
	gz.Reset(&out)
	_, _ = gz.Write(b)
	_ = gz.Close()
	gz.Reset(nil) // do not keep the page alive through the pool
	return out
}

// appendWriter is an io.Writer appending to itself.
type appendWriter []byte

func (w *appendWriter) Write(p []byte) (int, error) {
	*w = append(*w, p...)
	return len(p), nil
}

// publish builds the snapshot served until the next scrape ends. res is nil
// after a failed scrape: then only the sidecar's own metrics are served.
// Calls are serialised: New makes the first, ScrapeOnce (holding c.mu)
// every other.
func (c *Collector) publish(res *scrapeResult, now time.Time) {
	own := c.ownFamilies()
	var ownRouting []exposition.Family
	for _, f := range own {
		if f.Name == "vllm_up" {
			ownRouting = append(ownRouting, f)
		}
	}
	if age, ok := c.upstreamAge(now); ok {
		f := exposition.Family{
			Name: "vllm_normalizer_upstream_age_seconds",
			Help: "Seconds between the last successful scrape of vLLM and the moment this page was prepared.",
			Type: model.MetricTypeGauge,
			Samples: []exposition.Sample{{
				Labels: labels.FromStrings(model.MetricNameLabel, "vllm_normalizer_upstream_age_seconds"),
				Value:  age.Seconds(),
			}},
		}
		own = append(own, f)
		ownRouting = append(ownRouting, f)
	}

	var page, routing []exposition.Family
	if res != nil {
		page, routing = res.page, res.routing
	}
	s := &snapshot{
		page:    c.pageEnc.prepare(c.merge(page, own)),
		routing: c.routingEnc.prepare(c.merge(routing, ownRouting)),
	}
	c.snap.Store(s)
}

// gatherEvery is how long the families that the Gatherer adds to the
// Registry's (the Go and process collectors: the sidecar process itself)
// are reused before being gathered again.
const gatherEvery = time.Second

// ownFamilies returns the sidecar's own families: the Registry's (vllm_up
// and friends) gathered now, and the rest of the Gatherer's gathered at
// most once per gatherEvery of real time, since they describe the sidecar
// process rather than the scrape. Called by publish only.
func (c *Collector) ownFamilies() []exposition.Family {
	if c.cfg.Gatherer == prometheus.Gatherer(c.cfg.Registry) {
		return c.gather(c.cfg.Registry)
	}
	own := c.gather(c.cfg.Registry)
	seen := make(map[string]bool, len(own))
	for _, f := range own {
		seen[f.Name] = true
	}
	if c.otherFams == nil || time.Since(c.otherAt) >= gatherEvery {
		// The Gatherer's families minus the Registry's (served fresh).
		other := []exposition.Family{}
		for _, f := range c.gather(c.cfg.Gatherer) {
			if !seen[f.Name] {
				other = append(other, f)
			}
		}
		c.otherFams, c.otherAt = other, time.Now()
	}
	for _, f := range c.otherFams {
		if !seen[f.Name] {
			own = append(own, f)
		}
	}
	return own
}

func (c *Collector) gather(g prometheus.Gatherer) []exposition.Family {
	mfs, err := g.Gather()
	if err != nil {
		c.cfg.Logger.Error("gathering the sidecar's own metrics failed", "err", err)
	}
	return fromDTO(mfs)
}

func (c *Collector) upstreamAge(now time.Time) (time.Duration, bool) {
	last := c.lastSuccess.Load()
	if last == 0 {
		return 0, false
	}
	return now.Sub(time.Unix(0, last)), true
}

// merge sorts the families by name. A name both the upstream and the
// sidecar use keeps the upstream's family: vLLM's own process_* series, for
// instance, are what a dashboard means by that name.
func (c *Collector) merge(upstream, own []exposition.Family) []exposition.Family {
	out := make([]exposition.Family, 0, len(upstream)+len(own))
	out = append(out, upstream...)
	seen := make(map[string]bool, len(upstream))
	for _, f := range upstream {
		seen[f.Name] = true
	}
	for _, f := range own {
		if !seen[f.Name] {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b exposition.Family) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// MetricsHandler serves the full page: vLLM's families under current names,
// derived gauges, statuses and the sidecar's own metrics.
func (c *Collector) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serve(w, r, c.snap.Load().page)
	})
}

// RoutingHandler serves the small routing view. It answers 503 when the
// last successful scrape is older than three intervals, so that a router's
// own staleness handling takes over instead of trusting old numbers.
func (c *Collector) RoutingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		age, ok := c.upstreamAge(c.cfg.Now())
		if !ok || age > 3*c.cfg.Interval {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Retry-After", strconv.Itoa(max(1, int(c.cfg.Interval.Seconds()))))
			w.WriteHeader(http.StatusServiceUnavailable)
			if !ok {
				_, _ = w.Write([]byte("vLLM has not been scraped successfully yet; see vllm_normalizer_scrape_failures_total on /metrics\n"))
				return
			}
			_, _ = w.Write([]byte("the last successful scrape of vLLM is " + age.Truncate(time.Millisecond).String() + " old (more than three scrape intervals); see vllm_normalizer_scrape_failures_total on /metrics\n"))
			return
		}
		serve(w, r, c.snap.Load().routing)
	})
}

// Header values shared by every response. Each slice has len == cap, so a
// later Header.Add by anyone appends to a copy, never into these.
var (
	hdrText        = []string{exposition.ContentTypeText}
	hdrOpenMetrics = []string{exposition.ContentTypeOpenMetrics}
	hdrVary        = []string{"Accept-Encoding"}
	hdrGzip        = []string{"gzip"}
)

// openMetricsAccepted are the formats an Accept header naming OpenMetrics
// is negotiated against.
var openMetricsAccepted = expfmt.DefaultOpenMetricsAcceptedFormats()

func serve(w http.ResponseWriter, r *http.Request, p *prepared) {
	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	if accept := r.Header.Get("Accept"); containsFold(accept, "openmetrics") &&
		expfmt.NegotiateAccept(r.Header, openMetricsAccepted...).FormatType() == expfmt.TypeOpenMetrics {
		body, zipped := p.openMetrics()
		if gz {
			body = zipped
		}
		write(w, hdrOpenMetrics, body, []string{strconv.Itoa(len(body))}, gz)
		return
	}
	if gz {
		body, n := p.gzipped()
		write(w, hdrText, body, n, true)
		return
	}
	write(w, hdrText, p.text, p.textLen, false)
}

// write sends body with its Content-Length value.
func write(w http.ResponseWriter, ct []string, body []byte, bodyLen []string, gzipped bool) {
	h := w.Header()
	h["Content-Type"] = ct
	if len(h["Vary"]) == 0 {
		h["Vary"] = hdrVary
	} else {
		h.Add("Vary", "Accept-Encoding")
	}
	if gzipped {
		h["Content-Encoding"] = hdrGzip
	}
	h["Content-Length"] = bodyLen
	_, _ = w.Write(body)
}

// containsFold reports whether s contains sub (lower-case ASCII) in any
// case. Only an Accept header naming OpenMetrics needs full negotiation.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip
// (a "gzip;q=0" refuses it).
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			continue
		}
		q := strings.TrimSpace(params)
		if v, ok := strings.CutPrefix(q, "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f == 0 {
				return false
			}
		}
		return true
	}
	return false
}
