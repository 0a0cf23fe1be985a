package diagnosis

import "testing"

// The page's title names the server kind as its profile writes it, from
// mapping's profiles: a server with a profile needs no entry here.
func TestTitleNamesTheServerByItsProfile(t *testing.T) {
	for _, c := range []struct {
		servers []string
		want    string
	}{
		{[]string{"vllm", "vllm"}, "vLLM diagnosis"},
		{[]string{"sglang"}, "SGLang diagnosis"},
		{[]string{"trtllm"}, "TensorRT-LLM diagnosis"},
		{[]string{"llamacpp"}, "llama.cpp diagnosis"},
		{[]string{"dynamo"}, "Dynamo diagnosis"},
		{[]string{"myserver"}, "myserver diagnosis"}, // an operator profile's server
		{[]string{"vllm", "sglang"}, "LLM server diagnosis"},
		{[]string{"unknown"}, "LLM server diagnosis"},
	} {
		r := &Report{}
		for _, s := range c.servers {
			r.Models = append(r.Models, ModelReport{Server: s})
		}
		if got := title(r); got != c.want {
			t.Errorf("servers %v: title %q, want %q", c.servers, got, c.want)
		}
	}
}
