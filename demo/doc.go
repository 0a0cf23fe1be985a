// Package demo is the simulated vLLM upstream behind --demo: a real vLLM V1
// /metrics page, embedded in the binary, whose counters, histograms and load
// gauges move as a small simulation of a serving engine says they would.
//
// The embedded page (vllm-v1.prom) is a vLLM V1 dump for one engine
// (engine="0", model TinyLlama) published by the KServe project as
// config/monitoring/llmisvc/dashboards-odc/context/vllm_metrics.txt in
// kserve/kserve at commit 925c079e. docs/diagnosis.md#demo-scenarios says what is simulated.
package demo
