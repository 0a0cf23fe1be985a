package genai

import "testing"

// BenchmarkView is the view's share of a scrape cycle on fixture 13 (one
// vLLM V1 engine): the sums carried over from the last scrape, the
// re-bucketing and the attribute labels.
func BenchmarkView(b *testing.B) {
	canon, roles, server := canonical(b, "13-")
	v, _ := New(Options{ServerAddress: "vllm:8000"})
	b.ReportAllocs()
	for b.Loop() {
		v.View(canon, roles, server)
	}
}
