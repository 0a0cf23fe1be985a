// Command topologypages writes the constructed pages of the topologies no
// published /metrics dump shows (see package scenario): a vLLM
// prefill/decode pair and a four-engine data-parallel pod with one rank
// queueing while the others idle, and two pods refusing at admission, each
// at two scrapes 15 s apart.
//
//	go run ./scripts/topologypages           # rewrite testdata/fixtures
//	go run ./scripts/topologypages -dir X
package main
