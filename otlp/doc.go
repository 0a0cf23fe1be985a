// Package otlp pushes one of the sidecar's pages to an OTLP/HTTP receiver
// (an OpenTelemetry Collector, a managed backend, Prometheus 3's
// /api/v1/otlp) at a fixed interval: the samples the page serves, from
// the collector's published snapshot, never a scrape of its own.
//
// Gauges become OTLP gauges, counters monotonic cumulative sums, classic
// histograms explicit-bucket histograms and summaries summaries. Every
// cumulative point carries a true start time: the one the page gives the
// series (exposition.Family.Created, as /metrics dates it with
// --output.created-timestamps), so that a receiver counts what came
// before the first push; else when the pusher first saw the series. A
// restart the page does not date (its count went down, or the upstream's
// page announced it: Page.RestartedAt) moves the start to just after the
// previous push, so that a receiver sees the reset.
//
// A failing endpoint costs one export in flight at most: an export runs
// on its own goroutine with a timeout shorter than the interval, and a
// tick that finds the previous export still running is skipped and
// counted. Nothing queues.
package otlp
