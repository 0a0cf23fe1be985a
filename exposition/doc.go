// Package exposition holds the in-memory form of one Prometheus exposition
// page: families of flat samples, exactly as the upstream printed them.
//
// Samples stay flat (a histogram is its _bucket, _sum and _count samples, not
// a structured value) so that what the sidecar re-exposes is what vLLM
// printed: a histogram cut short upstream is re-exposed cut short, never
// completed with invented buckets or counts.
package exposition
