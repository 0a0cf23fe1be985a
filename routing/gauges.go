package routing

import (
	"math"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// ModelGauges are the gauges the view collapses per model, as values:
// requests running and waiting summed over engines and processes, KV-cache
// usage by its rule. NaN where the page lacked one.
type ModelGauges struct {
	Running, Waiting, KVUsage float64
}

const (
	gaugeRunning = iota
	gaugeWaiting
	gaugeKVUsage
)

// Gauges returns the collapsed gauges of the last View, by model_name, so
// that a reader (the diagnosis) takes the view's values without looking
// its families up by name. It must not be modified.
func (v *Viewer) Gauges() map[string]ModelGauges { return v.gauges }

// keep records samples as gauge g of their models and returns them.
func (v *Viewer) keep(g int, samples []exposition.Sample) []exposition.Sample {
	for _, s := range samples {
		m := s.Labels.Get(mapping.LabelModel)
		mg, ok := v.gauges[m]
		if !ok {
			mg = ModelGauges{Running: math.NaN(), Waiting: math.NaN(), KVUsage: math.NaN()}
		}
		switch g {
		case gaugeRunning:
			mg.Running = s.Value
		case gaugeWaiting:
			mg.Waiting = s.Value
		case gaugeKVUsage:
			mg.KVUsage = s.Value
		}
		v.gauges[m] = mg
	}
	return samples
}
