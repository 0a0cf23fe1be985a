package mapping

import "testing"

// TestCounterInputs checks the counter inputs' table against roles.yaml:
// each entry reads a counter role's value or one of a histogram role's
// parts, whose canonical sample exists, and no entry is listed twice.
func TestCounterInputs(t *testing.T) {
	cat, err := LoadCatalogue()
	if err != nil {
		t.Fatal(err)
	}
	roles := cat.Roles()
	seen := map[string]Counter{}
	for c := range NumCounters {
		def, ok := roles.Def(c.Role())
		if !ok {
			t.Errorf("counter input %d reads role %q, which roles.yaml lacks", c, c.Role())
			continue
		}
		switch def.Type {
		case RoleTypeCounter:
			if c.Part() != PartValue {
				t.Errorf("counter input %d reads part %d of counter role %s; a counter has only its value", c, c.Part(), c.Role())
			}
		case RoleTypeHistogram:
			if c.Part() == PartValue {
				t.Errorf("counter input %d reads histogram role %s without saying which part", c, c.Role())
			}
		default:
			t.Errorf("counter input %d reads role %s of type %s; the table holds counters and histograms only", c, c.Role(), def.Type)
		}
		name := roles.Sample(c.Role(), c.Part())
		if name == "" {
			t.Errorf("counter input %d: role %s has no canonical family", c, c.Role())
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("counter inputs %d and %d both read %s", prev, c, name)
		}
		seen[name] = c
	}
	if got := len(CounterRoles()); got == 0 || got > int(NumCounters) {
		t.Errorf("CounterRoles has %d roles for %d inputs", got, NumCounters)
	}
}
