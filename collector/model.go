package collector

import (
	"context"
	"time"

	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// modelAsk is how often the upstream's /v1/models is asked for the model of
// a page that names none: again after a failure, and again after a success
// (a restarted llama-server may load another model).
const modelAsk = 5 * time.Minute

// upstreamModel is the model name of a page whose server prints none
// (llama.cpp): --upstream.model-name, else the only model the upstream's
// /v1/models lists; source says which ("" with no name).
type upstreamModel struct {
	name, source string
	asked        time.Time
	lastErr      string
}

// modelFor returns the model name for this scrape and where it came from.
func (c *Collector) modelFor(ctx context.Context, now time.Time) (string, string) {
	if c.cfg.ModelName != "" {
		return c.cfg.ModelName, "flag"
	}
	m := &c.model
	if !m.asked.IsZero() && now.Sub(m.asked) < modelAsk && !now.Before(m.asked) {
		return m.name, m.source
	}
	m.asked = now
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	name, err := c.fetch.ModelName(ctx)
	if err != nil {
		if err.Error() != m.lastErr {
			c.cfg.Logger.Info("the upstream's page names no model and its /v1/models gave none; routing series carry no model_name", "err", err)
		}
		m.lastErr = err.Error()
		return m.name, m.source // a name found before stays until another is found
	}
	m.name, m.source, m.lastErr = name, "/v1/models", ""
	return m.name, m.source
}

// withModel labels every sample of the canonical page that has no
// model_name with name, in place: the families are this scrape's own
// (a profile without a model label builds its canonical page anew).
func withModel(canon []exposition.Family, name string) {
	var b labels.Builder
	for i := range canon {
		for j := range canon[i].Samples {
			s := &canon[i].Samples[j]
			if s.Labels.Get(mapping.LabelModel) != "" {
				continue
			}
			b.Reset(s.Labels)
			b.Set(mapping.LabelModel, name)
			s.Labels = b.Labels()
		}
	}
}
