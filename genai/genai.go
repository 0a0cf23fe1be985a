package genai

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
	"github.com/fos-study/vllm-normalizer/routing"
)

// Attribute (label) names, as the OpenTelemetry Prometheus exporter
// spells the conventions' attributes.
const (
	LabelRequestModel = "gen_ai_request_model"
	LabelProvider     = "gen_ai_provider_name"
	LabelOperation    = "gen_ai_operation_name"
	LabelAddress      = "server_address"
	LabelPort         = "server_port"
)

// NameStyle is how the metric names are spelled: with the unit suffix
// (the OpenTelemetry Prometheus exporter) or without (Envoy AI Gateway).
type NameStyle string

// The name styles.
const (
	Suffixed   NameStyle = "suffixed"
	Unsuffixed NameStyle = "unsuffixed"
)

// DefaultOperation is gen_ai_operation_name when none is given.
const DefaultOperation = "chat"

// Options are the view's settings; cmd/vllm-normalizer fills them from the
// --genai.* flags.
type Options struct {
	// Provider is gen_ai_provider_name; empty means the server kind of the
	// page's profile (vllm, sglang, trtllm).
	Provider string
	// Operation is gen_ai_operation_name; empty means DefaultOperation.
	Operation string
	// ServerAddress is host:port for server_address and server_port;
	// empty means neither label.
	ServerAddress string
	// NameStyle; empty means Suffixed.
	NameStyle NameStyle
}

// Metric is one histogram of the view.
type Metric struct {
	Role mapping.Role
	// Base is the Prometheus name without the unit suffix.
	Base string
	// Convention is the OpenTelemetry instrument name.
	Convention string
	// Advised are the conventions' advised bucket bounds (finite ones).
	Advised []float64
	what    string
}

// Metrics are the view's histograms, in name order.
var Metrics = []Metric{
	{mapping.RoleE2ELatency, "gen_ai_server_request_duration", "gen_ai.server.request.duration",
		[]float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92},
		"Duration of each request, arrival to last output token"},
	{mapping.RoleTimePerOutputToken, "gen_ai_server_time_per_output_token", "gen_ai.server.time_per_output_token",
		[]float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5},
		"Mean time per output token after the first, one observation per request (not the inter-token latency)"},
	{mapping.RoleTTFT, "gen_ai_server_time_to_first_token", "gen_ai.server.time_to_first_token",
		[]float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0},
		"Time to first token of each request"},
}

// Name is the metric's name in style s.
func (m Metric) Name(s NameStyle) string {
	if s == Unsuffixed {
		return m.Base
	}
	return m.Base + "_seconds"
}

// Check rejects options the view cannot honour, naming the setting, the
// value and the fix.
func (o Options) Check() error {
	_, _, err := o.hostPort()
	if err != nil {
		return err
	}
	switch o.NameStyle {
	case "", Suffixed, Unsuffixed:
	default:
		return fmt.Errorf("name style %q is not known; use suffixed (gen_ai_server_time_to_first_token_seconds) or unsuffixed (gen_ai_server_time_to_first_token)", o.NameStyle)
	}
	return nil
}

// hostPort splits ServerAddress into server_address and server_port.
func (o Options) hostPort() (string, string, error) {
	if o.ServerAddress == "" {
		return "", "", nil
	}
	host, port, err := net.SplitHostPort(o.ServerAddress)
	if err != nil {
		return "", "", fmt.Errorf("server address %q must be host:port (%v); give one like vllm.default.svc:8000 or [::1]:8000", o.ServerAddress, unwrapAddrErr(err))
	}
	if host == "" {
		return "", "", fmt.Errorf("server address %q has no host; give one like vllm.default.svc:8000", o.ServerAddress)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
		return "", "", fmt.Errorf("server address %q: the port %q must be a number from 1 to 65535; give one like vllm.default.svc:8000", o.ServerAddress, port)
	}
	return host, port, nil
}

// unwrapAddrErr drops the address net.SplitHostPort repeats in its error.
func unwrapAddrErr(err error) error {
	if ae, ok := errors.AsType[*net.AddrError](err); ok {
		return errors.New(ae.Err)
	}
	return err
}

// Viewer builds GenAI views. View keeps its own sums from one scrape to
// the next (routing.Sums) and is not safe for concurrent use; Render,
// from sums kept elsewhere, is.
type Viewer struct {
	opts       Options
	host, port string
	sums       routing.Sums

	// mu guards kept: views of two scrapes may be rendered at once, by
	// their readers.
	mu   sync.Mutex
	kept []shape // by Metrics' index
}

// shape is what a metric's view takes from the summed series' label sets
// alone, kept while they stay the same (the sums keep their label sets
// from scrape to scrape): which buckets stay, the help, and each sample's
// relabelled set. Relabelling with a labels.Builder and choosing the
// buckets anew was most of rendering the view.
type shape struct {
	// from are the summed series' label sets the shape was made for.
	from     []labels.Labels
	provider string
	help     string
	// labels are the relabelled sets by summed sample, nil for a sample
	// left out; store holds them.
	labels []*labels.Labels
	store  []labels.Labels
	// children are the created times' child label sets relabelled, as
	// pairs (from, to).
	children []labels.Labels
	relabel  func(labels.Labels) labels.Labels
}

// maxChildren bounds the created times' label sets a shape keeps.
const maxChildren = 64

// created returns the relabelled child labels of a created time.
func (k *shape) created(l labels.Labels) labels.Labels {
	for i := 0; i+1 < len(k.children); i += 2 {
		if labels.Equal(k.children[i], l) {
			return k.children[i+1]
		}
	}
	to := k.relabel(l)
	if len(k.children) >= 2*maxChildren {
		k.children = k.children[:0] // models come and go under one shape
	}
	k.children = append(k.children, l, to)
	return to
}

// shaped returns metric i's shape for summed, the kept one when summed
// has the label sets it was made for.
func (v *Viewer) shaped(i int, summed []exposition.Sample, provider string, m Metric) *shape {
	if len(v.kept) != len(Metrics) {
		v.kept = make([]shape, len(Metrics))
	}
	k := &v.kept[i]
	if k.provider == provider && len(k.from) == len(summed) && k.relabel != nil {
		same := true
		for j := range summed {
			if !labels.Equal(k.from[j], summed[j].Labels) {
				same = false
				break
			}
		}
		if same {
			return k
		}
	}
	keep, exact := rebucket(summed, m.Advised)
	help := fmt.Sprintf("%s, in seconds (OpenTelemetry %s), from the server's %s histogram summed over engines per model. ", m.what, m.Convention, m.Role)
	if exact {
		help += "Buckets: the advised bounds, a subset of the engine's, with the engine's exact cumulative counts there."
	} else {
		help += "Buckets: the engine's own bounds, kept because the advised bounds are not a subset of them (counts are never interpolated)."
	}
	var lb labels.Builder
	relabel := func(l labels.Labels) labels.Labels {
		lb.Reset(l)
		if mn := l.Get(mapping.LabelModel); mn != "" {
			lb.Set(LabelRequestModel, mn)
		}
		lb.Del(mapping.LabelModel)
		lb.Set(LabelProvider, provider)
		lb.Set(LabelOperation, v.opts.Operation)
		if v.host != "" {
			lb.Set(LabelAddress, v.host)
			lb.Set(LabelPort, v.port)
		}
		return lb.Labels()
	}
	*k = shape{from: make([]labels.Labels, len(summed)), provider: provider, help: help, labels: make([]*labels.Labels, len(summed)), relabel: relabel}
	kept := make([]int, 0, len(summed))
	for j, s := range summed {
		k.from[j] = s.Labels
		if keep(s) {
			kept = append(kept, j)
			k.store = append(k.store, relabel(s.Labels))
		}
	}
	for n, j := range kept {
		k.labels[j] = &k.store[n]
	}
	return k
}

// New returns a Viewer for valid options.
func New(o Options) (*Viewer, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	host, port, _ := o.hostPort()
	o.Operation = cmp.Or(o.Operation, DefaultOperation)
	o.NameStyle = cmp.Or(o.NameStyle, Suffixed)
	return &Viewer{opts: o, host: host, port: port}, nil
}

// Roles are the roles of the view's histograms: the sums Render reads.
func Roles() []mapping.Role {
	out := make([]mapping.Role, len(Metrics))
	for i, m := range Metrics {
		out[i] = m.Role
	}
	return out
}

// View returns the view's histograms for one canonical page (see
// mapping.Profile.Canonical) of a server of kind server (the profile's
// server; "" when no profile matched, then there is nothing to show),
// advancing the Viewer's own sums (restarts read from the values alone):
// Render of them.
func (v *Viewer) View(canon []exposition.Family, roles *mapping.Roles, server string) []exposition.Family {
	if server == "" {
		return nil
	}
	byName := make(map[string]*exposition.Family, len(canon))
	for i := range canon {
		byName[canon[i].Name] = &canon[i]
	}
	return v.Render(v.sums.Sum(func(r mapping.Role) *exposition.Family { return byName[roles.Family(r)] }, Roles(), routing.Restarts{}), server)
}

// Render returns the view's histograms from one scrape's sums of a server
// of kind server ("": nothing to show). A role without summed histogram
// totals (the page lacks it, or its engines print different bounds for
// one model) gives no histogram.
func (v *Viewer) Render(sums routing.Totals, server string) []exposition.Family {
	if server == "" {
		return nil
	}
	provider := cmp.Or(v.opts.Provider, server)
	var out []exposition.Family
	v.mu.Lock()
	defer v.mu.Unlock()
	for i, m := range Metrics {
		tot, ok := sums.Of(m.Role)
		if !ok || tot.Type != model.MetricTypeHistogram {
			continue
		}
		name := m.Name(v.opts.NameStyle)
		summed := tot.Samples(name)
		k := v.shaped(i, summed, provider, m)
		fam := exposition.Family{Name: name, Type: model.MetricTypeHistogram, Help: k.help, Samples: make([]exposition.Sample, 0, len(k.store))}
		if v.opts.NameStyle == Suffixed {
			fam.Unit = "seconds"
		}
		for j, s := range summed {
			if l := k.labels[j]; l != nil {
				fam.Samples = append(fam.Samples, exposition.Sample{Labels: *l, Value: s.Value})
			}
		}
		for _, c := range tot.Created() {
			fam.Created = append(fam.Created, exposition.Created{Labels: k.created(c.Labels), Time: c.Time})
		}
		if len(fam.Samples) > 0 {
			out = append(out, fam)
		}
	}
	slices.SortFunc(out, func(a, b exposition.Family) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rebucket decides the buckets of one summed histogram: the advised
// bounds (and +Inf) when every model's bounds contain all of them (exact),
// else every bucket. keep says whether a sample stays; a model whose
// histogram has no +Inf bucket (a page cut short) is left out whole, as no
// reader could take a quantile or a count from it.
func rebucket(summed []exposition.Sample, advised []float64) (keep func(exposition.Sample) bool, exact bool) {
	bounds := map[string][]float64{} // model -> its finite bucket bounds
	complete := map[string]bool{}    // model -> has a +Inf bucket
	for _, s := range summed {
		if !strings.HasSuffix(s.Name(), "_bucket") {
			continue
		}
		m := s.Labels.Get(mapping.LabelModel)
		le, err := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
		switch {
		case err != nil:
		case math.IsInf(le, 1):
			complete[m] = true
		default:
			bounds[m] = append(bounds[m], le)
		}
	}
	exact = len(complete) > 0
	for m := range complete {
		for _, a := range advised {
			if !slices.ContainsFunc(bounds[m], func(b float64) bool { return sameBound(a, b) }) {
				exact = false
			}
		}
	}
	return func(s exposition.Sample) bool {
		if !complete[s.Labels.Get(mapping.LabelModel)] {
			return false
		}
		if !exact || !strings.HasSuffix(s.Name(), "_bucket") {
			return true
		}
		le, _ := strconv.ParseFloat(s.Labels.Get(model.BucketLabel), 64)
		return math.IsInf(le, 1) || slices.ContainsFunc(advised, func(a float64) bool { return sameBound(a, le) })
	}, exact
}

// sameBound reports whether an engine bound is an advised one: equal, or
// equal but for the last bits a unit conversion may leave (a bound in
// milliseconds scaled to seconds).
func sameBound(advised, b float64) bool {
	return advised == b || math.Abs(advised-b) <= 1e-12*advised
}
