// Command trtllmiter builds the test fixture that stands for a TensorRT-LLM
// page with its iteration statistics on (enable_iter_perf_stats), for which
// no real /metrics dump is available: the one real TensorRT-LLM page in
// testdata/fixtures (25, a Dynamo worker) has only the per-request families.
//
//	go run ./scripts/trtllmiter            # rewrite the committed fixture
//	go run ./scripts/trtllmiter -in X -out Y
//
// The base page is kept byte for byte; after it come the iteration gauges and
// block counters that TensorRT-LLM's metrics collector registers, under their
// real names and labels, with the values of the table below: one consistent
// moment of a small engine (3 running, 2 waiting, 512 of 4096 KV blocks in
// use, so kv_cache_utilization is 512/4096 = 0.125). The HELP texts are this
// project's, not TensorRT-LLM's.
package main
