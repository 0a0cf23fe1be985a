package derive

import (
	"time"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/window"
)

// Limited is what a history's series cap left out of its last observation:
// the model_name values of the samples it could not keep, or every model.
type Limited struct {
	Models map[string]bool
	All    bool
}

// Any reports whether the cap left anything out.
func (l Limited) Any() bool { return l.All || len(l.Models) > 0 }

// LimitedBy returns what h's series cap left out of its last observation.
func LimitedBy(h *window.History, now time.Time) Limited {
	var l Limited
	h.Read(now, func(r *window.Reader) {
		lsets, all := r.Unwindowed()
		l.All = all
		for _, ls := range lsets {
			if l.Models == nil {
				l.Models = map[string]bool{}
			}
			l.Models[ls.Get(mapping.LabelModel)] = true
		}
	})
	return l
}

// Without returns fams without the derived samples of the limited models,
// in place: a model whose history misses some series has none of its
// derived gauges, on any engine, so that no sum over its engines reads
// less load than there is.
func (l Limited) Without(fams []exposition.Family) []exposition.Family {
	if !l.Any() {
		return fams
	}
	out := fams[:0]
	for _, f := range fams {
		kept := make([]exposition.Sample, 0, len(f.Samples))
		for _, s := range f.Samples {
			if !l.All && !l.Models[s.Labels.Get(mapping.LabelModel)] {
				kept = append(kept, s)
			}
		}
		if len(kept) > 0 {
			f.Samples = kept
			out = append(out, f)
		}
	}
	clear(fams[len(out):])
	return out
}
