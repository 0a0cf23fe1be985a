// Package diagnosis does the operators' triage of a throughput or latency
// regression automatically: it compares each signal over a recent window
// with the same signal over a baseline window that ends where the recent one
// starts (the pod against its own past, never against absolute thresholds),
// and applies the five-step reasoning (TTFT against inter-token latency,
// waiting against running, KV cache and preemptions, traffic shape, then
// configuration and hardware) to name the likely causes.
//
// Each cause is one record of causes (causes.go): its name, step, words,
// PromQL and rule together. It knows nothing of metric names: its input is
// one Observation per model and successful scrape, built by an adapter from
// the normalised page.
package diagnosis
