// Package mappingtest gives the tests of several packages the built-in
// catalogue and its mapper, as the command builds them without
// --mapping.config.
package mappingtest

import (
	"testing"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// Catalogue is the built-in catalogue; a catalogue that does not load fails t.
func Catalogue(t testing.TB) *mapping.Catalogue {
	t.Helper()
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// Mapper is the built-in catalogue's mapper with opts (the zero Options are
// the command's defaults).
func Mapper(t testing.TB, opts mapping.Options) *mapping.Mapper {
	t.Helper()
	m, err := mapping.New(Catalogue(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
