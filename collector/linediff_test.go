package collector

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// lineDiff is an ordered line diff of want and got: lines removed (-) and
// added (+), each with its line number in want or got, in page order, so
// that a moved or repeated line shows as well as a changed one. Common
// lines at both ends are skipped; the middle is aligned by longest common
// subsequence (or, past a size where that costs too much, shown whole).
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	pre := 0
	for pre < len(w) && pre < len(g) && w[pre] == g[pre] {
		pre++
	}
	suf := 0
	for suf < len(w)-pre && suf < len(g)-pre && w[len(w)-1-suf] == g[len(g)-1-suf] {
		suf++
	}
	mw, mg := w[pre:len(w)-suf], g[pre:len(g)-suf]
	var out []string
	del := func(i int) { out = append(out, fmt.Sprintf("-%5d: %s", pre+i+1, mw[i])) }
	add := func(j int) { out = append(out, fmt.Sprintf("+%5d: %s", pre+j+1, mg[j])) }
	if len(mw)*len(mg) > 4_000_000 {
		for i := range mw {
			del(i)
		}
		for j := range mg {
			add(j)
		}
	} else {
		// lcs[i][j]: longest common subsequence of mw[i:] and mg[j:].
		lcs := make([][]int32, len(mw)+1)
		for i := range lcs {
			lcs[i] = make([]int32, len(mg)+1)
		}
		for i, m := range slices.Backward(mw) {
			for j := len(mg) - 1; j >= 0; j-- {
				if m == mg[j] {
					lcs[i][j] = lcs[i+1][j+1] + 1
				} else {
					lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
				}
			}
		}
		i, j := 0, 0
		for i < len(mw) || j < len(mg) {
			switch {
			case i < len(mw) && j < len(mg) && mw[i] == mg[j]:
				i, j = i+1, j+1
			case j < len(mg) && (i == len(mw) || lcs[i][j+1] >= lcs[i+1][j]):
				add(j)
				j++
			default:
				del(i)
				i++
			}
		}
	}
	if len(out) > 40 {
		out = append(out[:40], fmt.Sprintf("... %d more lines", len(out)-40))
	}
	return strings.Join(out, "\n")
}

// TestLineDiff: the golden comparison's message shows order and repeats,
// not only lines that exist on one side.
func TestLineDiff(t *testing.T) {
	for _, c := range []struct {
		name, want, got, diff string
	}{
		{"same", "a\nb\nc", "a\nb\nc", ""},
		{"changed", "a\nb\nc", "a\nB\nc", "+    2: B\n-    2: b"},
		{"swapped", "a\nb\nc", "b\na\nc", "+    1: b\n-    2: b"},
		{"repeated", "a\nb\nc", "a\nb\nb\nc", "+    3: b"},
		{"dropped twin", "x\nx\ny", "x\ny", "-    2: x"},
		{"appended", "a", "a\nz", "+    2: z"},
	} {
		if got := lineDiff(c.want, c.got); got != c.diff {
			t.Errorf("%s: lineDiff =\n%s\nwant\n%s", c.name, got, c.diff)
		}
	}
}
