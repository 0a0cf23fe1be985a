package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// TestMissingConfigFilesNamed: a --config.file or --engine.profile-file
// that cannot be read fails the start (and a reload) naming the flag, the
// file and the fix, as every other setting's error does.
func TestMissingConfigFilesNamed(t *testing.T) {
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "absent.yml")
	for _, c := range []struct {
		flag   string
		loader mapperLoader
	}{
		{"--config.file", mapperLoader{path: missing, catalogue: cat}},
		{"--engine.profile-file", mapperLoader{profileFiles: []string{missing}, catalogue: cat}},
	} {
		_, err := c.loader.load()
		if err == nil {
			t.Fatalf("%s: a missing file loaded", c.flag)
		}
		for _, want := range []string{c.flag, missing, "give"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", c.flag, err, want)
			}
		}
	}
}
