package window

// Kind says how a kept sample is stored.
type Kind uint8

const (
	// Counter samples are stored reset-corrected.
	Counter Kind = iota + 1
	// Bucket samples are counters with a parsed le bound.
	Bucket
	// Gauge samples are stored as observed.
	Gauge
)

// Key identifies what a kept sample stands for; its meaning is the
// caller's (a derivation input).
type Key uint16

// Input is how one upstream sample name is kept.
type Input struct {
	Key  Key
	Kind Kind
}

// Inputs are the upstream samples a History keeps, by sample name.
type Inputs struct {
	bySample map[string]Input
	// byFamily holds every family name under which a kept sample may be
	// printed: the sample name itself (counters in text format 0.0.4, and
	// any sample whose family had no TYPE line) and the name without
	// _total or the histogram suffix (OpenMetrics counters, histograms).
	byFamily map[string]bool
}

// NewInputs returns the Inputs that keep exactly the given sample names.
func NewInputs(bySample map[string]Input) *Inputs {
	in := &Inputs{bySample: make(map[string]Input, len(bySample)), byFamily: map[string]bool{}}
	for name, i := range bySample {
		in.bySample[name] = i
		in.byFamily[name] = true
		for _, suf := range []string{"_total", "_bucket", "_sum", "_count"} {
			if len(name) > len(suf) && name[len(name)-len(suf):] == suf {
				in.byFamily[name[:len(name)-len(suf)]] = true
			}
		}
	}
	return in
}

// Family reports whether a family of that name may hold kept samples.
func (in *Inputs) Family(name string) bool { return in.byFamily[name] }

// Sample returns how a sample of that name is kept, if it is.
func (in *Inputs) Sample(name string) (Input, bool) {
	i, ok := in.bySample[name]
	return i, ok
}
