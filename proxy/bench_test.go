package proxy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
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

// streams is how many server-sent-event streams BenchmarkFirstByteUnderStreams
// keeps open: the load of issue 23's report (200 concurrent streams); ttft
// is the upstream's own time to the first token of the measured stream (a
// small model's), which both paths include.
const (
	streams = 200
	ttft    = 20 * time.Millisecond
)

// BenchmarkFirstByteUnderStreams measures the time to the first chunk of a
// new stream while 200 others stream a chunk every 10 ms each (20,000
// chunks a second through the same path), directly and through the proxy.
// One op is one new stream: request sent, first chunk read, stream closed.
// The proxy's first byte should stay within 1.5 times direct
// (docs/performance.md).
func BenchmarkFirstByteUnderStreams(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once := r.URL.Query().Get("once") != ""
		if once {
			time.Sleep(ttft) // the engine's own time to first token
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, sseChunk)
		w.(http.Flusher).Flush()
		if once {
			return
		}
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
			if _, err := io.WriteString(w, sseChunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	_, proxied := startProxy(b, up.URL, http.NotFoundHandler())
	for _, target := range []struct{ name, base string }{{"direct", up.URL}, {"proxied", proxied}} {
		b.Run("via="+target.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true, MaxIdleConnsPerHost: streams + 1}}
			defer c.CloseIdleConnections()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range streams {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, target.base+"/v1/chat/completions", strings.NewReader(`{"stream":true}`))
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					defer resp.Body.Close()
					_, _ = io.Copy(io.Discard, resp.Body)
				})
			}
			b.ResetTimer()
			for b.Loop() {
				resp, err := c.Post(target.base+"/v1/chat/completions?once=1", "application/json", strings.NewReader(`{"stream":true}`))
				if err != nil {
					b.Fatal(err)
				}
				ev, err := readEvent(bufio.NewReader(resp.Body))
				if err != nil || len(ev) != len(sseChunk) {
					b.Fatalf("read %d bytes, %v", len(ev), err)
				}
				resp.Body.Close()
			}
			b.StopTimer()
			cancel()
			wg.Wait()
		})
	}
}
