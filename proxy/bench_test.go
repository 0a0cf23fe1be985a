package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A chat-completion chunk as vLLM streams it (one token), and a /v1/models
// answer: the sizes the proxy carries most often.
const (
	sseChunk   = `data: {"id":"chatcmpl-5f0c1e2a9b7d4c3e8f6a1b2c3d4e5f60","object":"chat.completion.chunk","created":1764590000,"model":"my-model","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	modelsBody = `{"object":"list","data":[{"id":"my-model","object":"model","created":1764590000,"owned_by":"vllm","root":"Qwen/Qwen2.5-7B-Instruct","parent":null,"max_model_len":32768}]}`
)

// BenchmarkProxy measures what the proxy adds on loopback, against the same
// client talking to the same upstream directly:
//
//   - request/via={direct,proxied}: one GET /v1/models round trip on a
//     keep-alive connection.
//   - chunk/via={direct,proxied}: one streamed chunk inside a long-lived
//     server-sent-events response: the client asks the upstream for the next
//     chunk (a channel, not the network) and reads it; the time is from the
//     upstream's write to the client's read, plus the channel hop.
func BenchmarkProxy(b *testing.B) {
	next := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, modelsBody)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			select {
			case <-next:
			case <-r.Context().Done():
				return
			}
			_, _ = io.WriteString(w, sseChunk)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	_, proxied := startProxy(b, up.URL, http.NotFoundHandler())

	for _, target := range []struct{ name, base string }{{"direct", up.URL}, {"proxied", proxied}} {
		b.Run("request/via="+target.name, func(b *testing.B) {
			c := client()
			defer c.CloseIdleConnections()
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Get(target.base + "/v1/models")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
	for _, target := range []struct{ name, base string }{{"direct", up.URL}, {"proxied", proxied}} {
		b.Run("chunk/via="+target.name, func(b *testing.B) {
			c := client()
			defer c.CloseIdleConnections()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, target.base+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			defer resp.Body.Close()
			rd := bufio.NewReaderSize(resp.Body, 4096)
			b.ReportAllocs()
			for b.Loop() {
				next <- struct{}{}
				ev, err := readEvent(rd)
				if err != nil || len(ev) != len(sseChunk) {
					b.Fatalf("read %d bytes, %v", len(ev), err)
				}
			}
		})
	}
}
