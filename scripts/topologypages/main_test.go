package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// The committed pages are what the generator writes, and parse.
func TestCommittedPagesAreCurrent(t *testing.T) {
	for name, want := range pages() {
		got, err := os.ReadFile(filepath.Join("..", "..", "testdata", "fixtures", name))
		if err != nil {
			t.Fatalf("%v; run go run ./scripts/topologypages from the module root", err)
		}
		if string(got) != want {
			t.Errorf("%s is stale; run go run ./scripts/topologypages from the module root", name)
		}
		if _, _, err := exposition.Parse(got, "text/plain; version=0.0.4", exposition.ParseOptions{}); err != nil {
			t.Errorf("%s does not parse: %v", name, err)
		}
	}
}
