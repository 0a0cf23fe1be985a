package diagnosis

import (
	"html"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// An inter-token latency histogram withheld on every scrape (a child
// printed without +Inf, Observation.Withheld) leaves the model judged on
// the rest: ready, the ITL listed as withheld (not as not printed), and
// the page says why.
func TestWithheldITLStillReady(t *testing.T) {
	d := fedWithheld(t, InputITL)
	r := d.Report().Models[0].Readiness
	itl := inputWhat[InputITL]
	if r.State != ReadyOK || !slices.Equal(r.Withheld, []string{itl}) || slices.Contains(r.NotJudged, itl) {
		t.Errorf("readiness %+v, want ready with the ITL withheld, not among the inputs not printed", r)
	}
	rec := httptest.NewRecorder()
	d.PageHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/diagnosis", nil))
	if body := html.UnescapeString(rec.Body.String()); !strings.Contains(body, "Not judged, withheld as a histogram child (an engine or rank) is printed without its +Inf bucket, so the histogram has no total count until a page prints every child whole: "+itl+".") {
		t.Errorf("the page does not say why the ITL is not judged")
	}
}

// A KV-transfer time histogram withheld (a topology input, which the
// readiness' missing inputs never list) is named in readiness.withheld
// too, as the latency histograms are, beside its topology note.
func TestWithheldKVTransferListed(t *testing.T) {
	r := fedWithheld(t, InputKVTransferTime).Report().Models[0].Readiness
	if xfer := inputWhat[InputKVTransferTime]; r.State != ReadyOK || !slices.Equal(r.Withheld, []string{xfer}) {
		t.Errorf("readiness %+v, want ready with %q withheld", r, xfer)
	}
}

// fedWithheld is a diagnoser fed 800 healthy scrapes whose histogram input
// k (InputITL or InputKVTransferTime) was withheld on every one.
func fedWithheld(t *testing.T, k string) *Diagnoser {
	t.Helper()
	d, err := New(testOpts)
	if err != nil {
		t.Fatal(err)
	}
	p := newPod()
	for i := range 800 {
		o := p.tick(healthy)
		switch k {
		case InputITL:
			o.ITL = Histogram{}
		case InputKVTransferTime:
			o.KVTransferTime = Histogram{}
		default:
			t.Fatalf("%s: not a histogram input that can be withheld", k)
		}
		o.Withheld = []string{k}
		d.Observe(t0.Add(time.Duration(i)*time.Second), []Observation{o})
	}
	return d
}
