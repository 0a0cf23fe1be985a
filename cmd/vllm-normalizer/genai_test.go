package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fos-study/vllm-normalizer/collector"
	"github.com/fos-study/vllm-normalizer/diagnosis"
)

func TestGenAIFlagChecks(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--genai.server-address=vllm.ns.svc"}, `--genai.server-address: server address "vllm.ns.svc" must be host:port`},
		{[]string{"--genai.server-address=:8000"}, "has no host"},
		{[]string{"--genai.server-address=vllm:0"}, `the port "0" must be a number from 1 to 65535`},
		{[]string{"--genai.operation-name="}, "--genai.operation-name is empty"},
		{[]string{"--genai.name-style=camel"}, "enum value must be one of suffixed,unsuffixed"},
		{[]string{"--web.routing-path=/metrics/genai"}, "--web.routing-path=/metrics/genai is taken"},
	} {
		_, err := parseFlags(tc.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}

const ttftPage = `# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.005",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.02",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.04",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.06",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.08",model_name="m"} 0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.25",model_name="m"} 1
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.75",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",le="2.5",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",le="5.0",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",le="7.5",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",le="10.0",model_name="m"} 2
vllm:time_to_first_token_seconds_bucket{engine="0",le="20.0",model_name="m"} 3
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 12.6
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3
`

// TestGenAIView: /metrics/genai serves the view with the flags'
// attributes and name style, and the landing page links it.
func TestGenAIView(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, ttftPage) }))
	defer up.Close()
	f, err := parseFlags([]string{"--genai.provider-name=acme-vllm", "--genai.operation-name=text_completion", "--genai.server-address=vllm.ns.svc:8000", "--genai.name-style=unsuffixed"}, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	m := testMapper(t)
	diag, err := diagnosis.New(f.diagnosisOptions())
	if err != nil {
		t.Fatal(err)
	}
	coll, err := collector.New(collector.Config{ScrapeURI: up.URL, Interval: f.scrapeInterval, MaxBodyBytes: int64(f.maxBody),
		Windows: uniqueWindows(f.windows), Mapper: m, Registry: prometheus.NewRegistry(), Diagnosis: diag, GenAI: f.genai})
	if err != nil {
		t.Fatal(err)
	}
	coll.ScrapeOnce(context.Background())
	mux, err := newMux(f, coll, diag, func() error { return nil }, "")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	code, body := get("/metrics/genai")
	for _, want := range []string{
		`gen_ai_server_time_to_first_token_bucket{gen_ai_operation_name="text_completion",gen_ai_provider_name="acme-vllm",gen_ai_request_model="m",le="0.5",server_address="vllm.ns.svc",server_port="8000"} 2`,
		`gen_ai_server_time_to_first_token_count{gen_ai_operation_name="text_completion",gen_ai_provider_name="acme-vllm",gen_ai_request_model="m",server_address="vllm.ns.svc",server_port="8000"} 3`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics/genai answered %d without %s:\n%s", code, want, body)
		}
	}
	if strings.Contains(body, `le="20.0"`) || strings.Contains(body, "vllm:") {
		t.Errorf("/metrics/genai serves more than the re-bucketed view:\n%s", body)
	}
	if code, body := get("/"); code != 200 || !strings.Contains(body, `href="/metrics/genai"`) {
		t.Errorf("landing page (%d) does not link /metrics/genai:\n%s", code, body)
	}
}
