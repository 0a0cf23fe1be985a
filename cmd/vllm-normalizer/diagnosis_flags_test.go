package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/internal/setting"
)

// A refused diagnosis flag's fix offers a value; given, that value is
// accepted, also where the windows are longer than the defaults are meant
// for (then the flag left at its default is the one refused).
func TestDiagnosisFlagFixAccepted(t *testing.T) {
	for _, args := range [][]string{
		{"--diagnosis.window=0s"},
		{"--diagnosis.min-change=0"},
		{"--diagnosis.significance=0"},
		{"--diagnosis.max-incident=0s"},
		{"--diagnosis.baseline-lookback=0s"},
		{"--diagnosis.baseline=3h"},
		{"--diagnosis.baseline=8h", "--diagnosis.max-incident=24h"},
	} {
		_, err := parseFlags(args, io.Discard, io.Discard)
		var e *setting.Error
		if !errors.As(err, &e) || !strings.HasPrefix(e.Name, "--diagnosis.") {
			t.Errorf("%v: %v, want a diagnosis flag refused", args, err)
			continue
		}
		_, example, ok := strings.Cut(e.Fix, "such as ")
		if !ok {
			t.Errorf("%v: the fix %q offers no value", args, e.Fix)
			continue
		}
		example, _, _ = strings.Cut(example, " ") // "0.25 (25 %)"
		fixed := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, e.Name+"=") })
		fixed = append(fixed, e.Name+"="+example)
		if _, err := parseFlags(fixed, io.Discard, io.Discard); err != nil {
			t.Errorf("%v: %q offered as the fix, then %v refused: %v", args, e, fixed, err)
		}
	}
}
