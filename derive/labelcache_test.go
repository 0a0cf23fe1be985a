package derive

import (
	"strconv"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
)

// The cache hands back the label set it built for a key, and it does not
// grow without bound when every derivation asks for new keys (models come
// and go): what nobody asked for in keepRounds derivations is dropped.
func TestLabelCacheReusesAndStaysBounded(t *testing.T) {
	var c labelCache
	builds := 0
	build := func(v string) func() labels.Labels {
		return func() labels.Labels { builds++; return labels.FromStrings("model_name", v) }
	}
	c.begin()
	a := c.get(labelKey{name: "x", group: "m1"}, build("m1"))
	c.end()
	c.begin()
	b := c.get(labelKey{name: "x", group: "m1"}, build("other"))
	c.end()
	if builds != 1 || !labels.Equal(a, b) || b.Get("model_name") != "m1" {
		t.Fatalf("second derivation: %d builds, got %s then %s; want one build and the same set", builds, a, b)
	}

	const perRound = 1000
	for round := range 50 {
		c.begin()
		for i := range perRound {
			k := strconv.Itoa(round*perRound + i)
			c.get(labelKey{name: "x", group: k}, build(k))
		}
		c.end()
		if most := (keepRounds + 1) * perRound; len(c.m) > most {
			t.Fatalf("round %d: the cache holds %d label sets, want at most %d", round, len(c.m), most)
		}
	}
}
