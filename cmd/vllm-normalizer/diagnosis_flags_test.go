package main

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/fos-study/vllm-normalizer/diagnosis"
	"github.com/fos-study/vllm-normalizer/internal/setting"
)

// A refused diagnosis flag's fix offers a value; given, that value is
// accepted, also where the windows are long (the fix follows them).
func TestDiagnosisFlagFixAccepted(t *testing.T) {
	for _, args := range [][]string{
		{"--diagnosis.window=0s"},
		{"--diagnosis.min-change=0"},
		{"--diagnosis.significance=0"},
		{"--diagnosis.max-incident=0s"},
		{"--diagnosis.baseline-lookback=0s"},
		{"--diagnosis.baseline=3h", "--diagnosis.max-incident=3h"},
		{"--diagnosis.baseline=8h", "--diagnosis.baseline-lookback=6h"},
		{"--diagnosis.window=2h", "--diagnosis.baseline=8h", "--diagnosis.max-incident=10h"},
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

// A diagnosis flag left unset takes the default New derives from the
// windows given, so a longer baseline alone starts; a value given is still
// checked as given, and a too-short one refused with the derived fix.
func TestDiagnosisDefaultsFollowTheWindows(t *testing.T) {
	for _, tc := range []struct {
		args                  []string
		maxIncident, lookback string
	}{
		{nil, "3h", "6h"},
		{[]string{"--diagnosis.baseline=3h"}, "6h2m", "6h"},
		{[]string{"--diagnosis.baseline=8h"}, "16h2m", "8h"},
		{[]string{"--diagnosis.window=30m", "--diagnosis.baseline=2h"}, "5h", "6h"},
		{[]string{"--diagnosis.baseline=8h", "--diagnosis.max-incident=9h"}, "9h", "8h"},
		{[]string{"--diagnosis.baseline=3h", "--diagnosis.baseline-lookback=12h"}, "6h2m", "12h"},
	} {
		f, err := parseFlags(tc.args, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("%v refused: %v", tc.args, err)
			continue
		}
		d, err := diagnosis.New(f.diagnosisOptions())
		if err != nil {
			t.Errorf("%v passed the flag check, then New refused: %v", tc.args, err)
			continue
		}
		if rep := d.Report(); rep.MaxIncident != tc.maxIncident || rep.Lookback != tc.lookback {
			t.Errorf("%v: max incident %s, lookback %s; want %s, %s", tc.args, rep.MaxIncident, rep.Lookback, tc.maxIncident, tc.lookback)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--diagnosis.baseline=3h", "--diagnosis.max-incident=3h"},
			"--diagnosis.max-incident=3h is not longer than the recent window plus the baseline (3h1m): an incident would end before its level fills the baseline; lengthen it, such as 6h2m"},
		{[]string{"--diagnosis.baseline=8h", "--diagnosis.baseline-lookback=6h"},
			"--diagnosis.baseline-lookback=6h is shorter than the baseline (8h): the incident-free baseline could never be whole; lengthen it to at least the baseline, such as 8h"},
	} {
		if _, err := parseFlags(tc.args, io.Discard, io.Discard); err == nil || err.Error() != tc.want {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}
