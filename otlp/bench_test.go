package otlp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/exposition"
)

// demoFamilies is the demo's V1 page over 16 data-parallel engines
// (~620 KB), parsed: the largest page the benchmarks of the other
// packages read.
func demoFamilies(b *testing.B) []exposition.Family {
	b.Helper()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	up, err := demo.New(demo.Options{Engines: 16, Seed: 1, Now: func() time.Time { return now }})
	if err != nil {
		b.Fatal(err)
	}
	fams, _, err := exposition.Parse(up.Page(), exposition.ContentTypeText, exposition.ParseOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return fams
}

// BenchmarkConvert is one push's conversion of that page, start times
// kept across pushes as the pusher keeps them.
func BenchmarkConvert(b *testing.B) {
	fams := demoFamilies(b)
	c := NewConverter()
	at := time.Unix(1e9, 0)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(15 * time.Second)
		c.Convert(Page{Families: fams, At: at})
	}
}

// BenchmarkExport is one push of that page as a whole: the conversion,
// the protobuf encoding and the request to a loopback receiver that
// reads and drops it.
func BenchmarkExport(b *testing.B) {
	fams := demoFamilies(b)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	b.Cleanup(srv.Close)
	p, err := New(context.Background(), Options{Endpoint: srv.URL + "/v1/metrics", Interval: time.Minute, Source: func() (Page, bool) { return Page{}, false }})
	if err != nil {
		b.Fatal(err)
	}
	at := time.Unix(1e9, 0)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(15 * time.Second)
		ms := p.conv.Convert(Page{Families: fams, At: at})
		rm := &metricpb.ResourceMetrics{Resource: &resourcepb.Resource{Attributes: p.res}, ScopeMetrics: []*metricpb.ScopeMetrics{{Scope: p.scope, Metrics: ms}}}
		if err := p.exporter.Export(context.Background(), rm); err != nil {
			b.Fatal(err)
		}
	}
}
