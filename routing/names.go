package routing

import (
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// names is withName remembering, from one build of the views to the next,
// each call's label set by its place in the build: a scrape of the same
// series makes the same calls in the same order, and each is then one
// labels.Equal and a name comparison instead of a new label set. The
// returned sets are the last build's, so the views' encoders (which
// compare them with the last page's) find them unchanged at a pointer
// comparison. Builds of two scrapes may run at once, on their readers'
// goroutines: a build holds mu throughout.
type names struct {
	mu         sync.Mutex
	last, next []namedSet
	// helps are the summed families' HELP texts, which depend only on
	// the family and the catalogue: made once, not concatenated a build.
	helps map[helpKey]string
}

// helpKey is what a summed family's HELP depends on.
type helpKey struct {
	role      mapping.Role
	family    string
	typ       model.MetricType
	legacy    bool // a legacy name of the family
	ownLegacy bool // one the server printed itself
}

// maxHelps bounds helps across reloads of the catalogue.
const maxHelps = 256

// help returns build(), built once per key.
func (n *names) help(k helpKey, build func() string) string {
	if n == nil {
		return build()
	}
	if h, ok := n.helps[k]; ok {
		return h
	}
	if n.helps == nil || len(n.helps) >= maxHelps {
		n.helps = map[helpKey]string{}
	}
	h := build()
	n.helps[k] = h
	return h
}

type namedSet struct {
	from labels.Labels
	name string
	to   labels.Labels
}

// start begins a build; end ends it. A nil *names remembers nothing.
func (n *names) start() {
	if n != nil {
		n.mu.Lock()
		n.next = n.next[:0]
	}
}

func (n *names) end() {
	if n != nil {
		clear(n.last)
		n.last, n.next = n.next, n.last
		n.mu.Unlock()
	}
}

// withName is withName(l, name), the last build's set when its call at
// this place had the same arguments.
func (n *names) withName(l labels.Labels, name string) labels.Labels {
	if n == nil {
		return withName(l, name)
	}
	i := len(n.next)
	var to labels.Labels
	if i < len(n.last) && n.last[i].name == name && labels.Equal(n.last[i].from, l) {
		to = n.last[i].to
	} else {
		to = withName(l, name)
	}
	n.next = append(n.next, namedSet{from: l, name: name, to: to})
	return to
}
