package derive

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/fos-study/vllm-normalizer/demo"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// A Deriver that keeps its groupings and its families' sort orders from
// one derivation to the next derives what a new Deriver derives from the
// same history, scrape after scrape, while a second engine appears on the
// page and goes again; the same grouping asked twice in one call gives
// the same families twice. The pages are the demo upstream's (fixture
// 13's families, values moving) over one engine, and over two while the
// second is up, then one engine again for 30 scrapes a second apart.
func TestGroupingPlansFollowTheHistory(t *testing.T) {
	// With a known cap the specs per model are computed too, by a second
	// grouping into the grouping by engine's families.
	for _, queued := range []int{0, 64} {
		t.Run(fmt.Sprintf("queued-cap=%d", queued), func(t *testing.T) {
			now := at(0)
			clock := func() time.Time { return now }
			one, err := demo.New(demo.Options{Now: clock, Seed: 1, Engines: 1})
			if err != nil {
				t.Fatal(err)
			}
			two, err := demo.New(demo.Options{Now: clock, Seed: 1, Engines: 2})
			if err != nil {
				t.Fatal(err)
			}
			cat, err := mapping.LoadCatalogue()
			if err != nil {
				t.Fatal(err)
			}
			kept := New(cat.Roles()).WithQueuedReqsCap(queued)
			h := NewHistory([]time.Duration{time.Minute}, time.Second)
			atCap := 0 // derivations with the per-model gauge
			for i := range 42 {
				now = at(float64(10 * i))
				if i >= 12 {
					now = at(float64(110 + i))
				}
				page := one.Page()
				if i >= 4 && i < 8 {
					page = two.Page()
				}
				h.Observe(now, normalizedPage(t, string(page)))
				got := kept.Groupings(h.History, now, byModelEngine, byModel, byModelEngine)

				want := New(cat.Roles()).WithQueuedReqsCap(queued).Groupings(h.History, now, byModelEngine, byModel)
				if !reflect.DeepEqual(got[:2], want) {
					t.Fatalf("scrape %d: the kept groupings derive\n%v\na new Deriver derives\n%v", i, got[:2], want)
				}
				if !reflect.DeepEqual(got[2], want[0]) {
					t.Fatalf("scrape %d: the grouping by engine asked twice derives\n%v\nthe second time, not\n%v", i, got[2], want[0])
				}
				for _, f := range got[0] {
					if f.Name == DerivedAdmissionAtCap {
						atCap++
					}
				}
				second := 0
				for _, f := range got[0] {
					for _, smp := range f.Samples {
						if smp.Labels.Get(mapping.LabelEngine) == "1" {
							second++
						}
					}
				}
				// Guards the page: the second engine is derived while it is up
				// (and its points are in the window a while after).
				if (i >= 5 && i < 8) != (second > 0) && i < 8 {
					t.Errorf("scrape %d: %d derived series of engine 1", i, second)
				}
			}
			if (queued > 0) != (atCap > 30) {
				t.Fatalf("%s derived in %d of 42 derivations with a queued cap of %d", DerivedAdmissionAtCap, atCap, queued)
			}
			// Guards the test: most families were put in order by the kept
			// permutation (about 20 a grouping, 3 groupings, 42 scrapes).
			t.Logf("%d of %d families put in their last order", kept.labels.ordersKept, kept.labels.ordersKept+kept.labels.ordersSorted)
			if kept.labels.ordersKept < 2*kept.labels.ordersSorted {
				t.Fatalf("%d families put in their last order, %d sorted: the test would not test the kept order", kept.labels.ordersKept, kept.labels.ordersSorted)
			}
		})
	}
}
