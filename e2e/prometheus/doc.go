// Package prometheus holds no code besides its tests, which run a real
// Prometheus server (the one Debian's "prometheus" package ships) against
// the real sidecar binary: they check that the derived gauges agree with
// PromQL over the raw series, and that every dashboard and rule query
// returns data. See docs/agreement.md.
package prometheus
