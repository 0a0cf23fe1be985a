// Package scenario describes the constructed pages of what no published
// /metrics dump shows: a vLLM prefill/decode pair (NIXL KV connector, KV
// offload to CPU), a vLLM pod of four data-parallel engines where one
// rank queues while the others idle, and vLLM pods refusing requests at
// admission, one for each of its two caps. Every value is a linear function of the seconds since
// the servers started, so tests compute the true value of each derived
// gauge from the parameters here, and scripts/topologypages writes the
// pages committed under testdata/fixtures.
package scenario
