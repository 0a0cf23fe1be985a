// Command vllm-normalizer runs next to an LLM inference server, scrapes its
// /metrics and serves stable, router-ready pages. It only parses flags
// (docs/flags.md), wires the packages and serves.
package main
