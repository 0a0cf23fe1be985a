package diagnosis

// Observation is what one successful scrape says about one model, with the
// data-parallel engines and API-server processes collapsed.
//
// Gauges are the values now. Counters and histogram buckets are cumulative
// and reset-corrected by the caller (a restart of vLLM must not look like a
// drop): they only ever grow. A value the upstream does not expose is NaN; a
// histogram it does not expose has no bounds.
type Observation struct {
	Model string
	// Server is the kind of server that printed the page (vllm, sglang,
	// ...), for the page's title; empty when unknown.
	Server string

	Running float64 // requests in the running batch
	Waiting float64 // requests waiting to be scheduled
	KVUsage float64 // KV-cache usage, 0..1

	Preemptions      float64
	PrefixQueries    float64 // prefix-cache lookups, in tokens
	PrefixHits       float64 // prefix-cache hits, in tokens
	PromptTokens     float64 // prompt tokens processed
	GenerationTokens float64 // tokens generated
	PromptLenSum     float64 // sum and count of the per-request prompt length histogram
	PromptLenCount   float64
	GenLenSum        float64 // sum and count of the per-request generation length histogram
	GenLenCount      float64
	Finished         float64 // finished requests, whatever the reason
	// Aborted are the finished requests the client abandoned (finished
	// reason abort); NaN where the page gives no finished reason.
	Aborted float64

	TTFT Histogram // time to first token, seconds
	ITL  Histogram // inter-token latency, seconds
	// TTFTSum and ITLSum are those histograms' sums, seconds: over their
	// counts, the exact mean latency, which no bucket width blurs. NaN
	// when unknown.
	TTFTSum, ITLSum float64
	// Per-request prompt and generation lengths, tokens: their spread
	// bounds the noise of the mean lengths.
	PromptLen, GenLen Histogram

	// Role is the pod's role in a disaggregated deployment: "prefill",
	// "decode", or "" (both, or not disaggregated).
	Role string
	// Engines are the model's data-parallel engines (ranks) now, one per
	// engine label value; empty or one when the page has no ranks.
	Engines []EngineLoad
	// KVTransferTime is the KV-transfer duration histogram (seconds) of a
	// disaggregated pod, KVTransferFailures its failed transfers; no
	// bounds and NaN where the server prints none.
	KVTransferTime     Histogram
	KVTransferFailures float64
	// Rejections are the requests the server refused at admission (HTTP
	// 503 at a queue cap, vLLM 0.29 on); NaN where it prints none.
	Rejections float64
	// Withheld are the histogram inputs (InputTTFT, InputITL,
	// InputKVTransferTime) the page printed but not whole this scrape: a
	// child (an engine or rank) without its +Inf bucket leaves no total
	// count, so the adapter gave none, and the page says why.
	Withheld []string
}

// EngineLoad is one data-parallel engine's gauges now, and its finished
// requests where the page counts them per engine (vLLM V1's
// request_success_total with its engine label).
type EngineLoad struct {
	Engine           string
	Running, Waiting float64
	// Finished is the engine's finished requests, cumulative and
	// reset-corrected as the Observation's counters are; read only where
	// Counted (a zero value is no count).
	Finished float64
	Counted  bool
}

// Histogram is a classic histogram's cumulative buckets: Counts[i]
// observations were at most Bounds[i]. Bounds ascend and the last is +Inf.
type Histogram struct {
	Bounds []float64
	Counts []float64
}
