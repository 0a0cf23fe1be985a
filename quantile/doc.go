// Package quantile estimates quantiles from classic-histogram buckets the way
// PromQL's histogram_quantile does, so that a quantile the sidecar serves
// matches what Prometheus computes from the same bucket increases.
package quantile
