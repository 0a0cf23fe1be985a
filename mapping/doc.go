// Package mapping turns what a vLLM server prints on /metrics into a stable
// set of metric names, and reports how the page relates to vLLM's history.
//
// It also holds what the product knows about servers as data: roles.yaml
// (the quantities derivations and the routing view read, with their units),
// the role each current catalogue family plays, and one profile per server
// kind under profiles/ (vLLM, SGLang, TensorRT-LLM, llama.cpp, Dynamo,
// ATOM, TokenSpeed) that maps
// the server's native families onto roles. Profile.Canonical turns any
// supported page into the canonical one (roles under vLLM V1's names),
// which is all that downstream packages read.
//
// The package is pure: no I/O, no flags, no mutable globals. Its only
// package-level data is the embedded, read-only catalogue (catalogue.yaml),
// which lists every vllm: family vLLM has ever printed: type, unit, labels,
// kind (routing gauge, diagnostic counter/histogram, info), the release or
// main-branch date it was added, deprecated, hidden and removed, and the
// family that replaced it when it was renamed.
//
// # Order of operations
//
// One scrape goes through three steps, in this order:
//
//  1. Normalize: legacy names become current ones (vllm:gpu_cache_usage_perc
//     is also served as vllm:kv_cache_usage_perc, with the same labels,
//     values and buckets, and a HELP that says where it came from). When the
//     page holds both names, as vLLM 0.9.2 to 0.11 prints them, the current
//     family is used and the legacy twin left out of the output; if the
//     twin's values differed, the current name is listed in
//     Report.Disagreements. Every legacy family the page printed is in
//     Report.Kept as printed, for the page to serve beside the current
//     name. The Report also carries one Status per catalogue metric and what
//     the page says about the engine (v0 or v1) and release.
//  2. Derive (outside this package): routing gauges are computed from the
//     normalised families, so they only ever see current names.
//  3. Present (of the normalised families plus Report.Kept): the families
//     the configuration drops are removed, legacy aliases are added when
//     enabled (never when the upstream itself prints the legacy name), the user's metric_relabel_configs run per series as
//     in Prometheus, names take the chosen style (colon or underscore), and
//     collisions are resolved by keeping the first family or series and
//     counting the rest.
//
// # Statuses
//
// StatusFamilies exposes vllm_normalizer_metric_status{metric, status,
// replacement} with one series per catalogue metric. The status is one of:
//
//	present    a current name that is served, from the upstream's own series
//	           or mapped from a legacy name
//	renamed    a legacy name this upstream prints: served as printed and
//	           also as the family named by replacement
//	superseded a legacy name this upstream does not print; its data, if
//	           any, is in the family named by replacement
//	legacy     a name vLLM removed without successor that this older upstream
//	           still prints; it is passed through unchanged
//	removed    a name vLLM removed without successor that this upstream does
//	           not print (vllm:cpu_cache_usage_perc on a V1 server)
//	absent     a current name this upstream does not print (too old, or an
//	           optional feature that is off)
//	until_first_request
//	           a current name that this V1 release prints only after its
//	           first request (running and waiting before vLLM #60155), on a
//	           page that counts no finished request yet
//
// Renames that depend on a label (the KV-offload transfer_type families,
// split into load_* and store_*) report every target in replacement,
// comma-separated; series with a label value the catalogue does not know
// keep their legacy name.
package mapping
