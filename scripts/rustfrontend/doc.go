// Command rustfrontend builds the test fixture that stands for vLLM's Rust
// frontend (VLLM_USE_RUST_FRONTEND=1), for which no real /metrics dump is
// available. It rewrites a real page of the Python frontend the way the Rust
// frontend's page is documented to differ, and checks that the result parses
// with Prometheus's OpenMetrics parser:
//
//	go run ./scripts/rustfrontend            # rewrite the committed fixture
//	go run ./scripts/rustfrontend -in X -out Y
//
// The rewrite, family by family:
//   - OpenMetrics 1.0 text ending in "# EOF"; counters are typed under their
//     base name (TYPE vllm:prompt_tokens counter, samples ..._total);
//   - no _created series, no process_* or python_* collectors;
//   - left out because the Rust frontend does not register them:
//     vllm:cache_config_info, vllm:engine_sleep_state,
//     vllm:iteration_tokens_total, vllm:mm_cache_*, vllm:corrupted_requests,
//     every KV-connector and KV-offload family, and
//     vllm:prompt_tokens_recomputed (removed from vLLM before the Rust
//     frontend existed); of the HTTP families only http_requests,
//     http_request_duration_seconds and http_request_duration_highr_seconds;
//   - HELP texts lose their final period;
//   - token-count histograms get one more bound, 131072, above the Python
//     frontend's last one (max_model_len); nothing is observed above
//     max_model_len, so that bucket holds the +Inf count;
//   - vllm:lora_requests_info loses its max_lora label;
//   - histogram series are written sum, count, then buckets.
//
// Values and label sets are the base page's, byte for byte: nothing else is
// invented, not even families a real Rust page of that time would add.
package main
