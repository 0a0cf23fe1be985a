package mapping

import (
	"cmp"
	"maps"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/fos-study/vllm-normalizer/exposition"
)

// engineLabelSince is the first release whose V1 engine puts an "engine"
// label on its series (V0 never did).
var engineLabelSince = release{0, 8, 3}

// detectUpstream decides which vLLM engine printed the page, from:
//   - families only one engine ever printed (catalogue engines field);
//   - the "engine" label, which only V1 sets;
//   - the HELP text of vllm:num_requests_running, which V0 words as
//     "running on GPU" and V1 as "in model execution batches".
//
// Evidence for both engines (a composite page) gives "unknown". The
// version hint is the intersection of the release ranges in which every
// catalogue family on the page existed, using exact release tags only.
func (m *Mapper) detectUpstream(in []exposition.Family, index map[string]int) UpstreamInfo {
	var v0, v1 []string
	var lower, upper release
	haveLower, haveUpper := false, false
	// Releases parsed once, when the catalogue was loaded.
	bound := func(i int) {
		if a := m.cat.added[i]; a.ok && (!haveLower || lower.less(a.r)) {
			lower, haveLower = a.r, true
		}
		if r := m.cat.removed[i]; r.ok && (!haveUpper || r.r.less(upper)) {
			upper, haveUpper = r.r, true
		}
	}
	// Only the first of each engine's evidence in name order is printed,
	// so only the least name of each is kept.
	var v0Only, v1Only string
	engineLabel, anyVLLM := false, false
	for i := range in {
		f := &in[i]
		if !strings.HasPrefix(f.Name, m.cat.Prefix) {
			continue
		}
		anyVLLM = true
		if !engineLabel && len(f.Samples) > 0 && f.Samples[0].Labels.Has("engine") {
			engineLabel = true
		}
		j, ok := m.cat.byName[f.Name]
		if !ok && f.Type == model.MetricTypeCounter {
			j, ok = m.cat.byName[f.Name+"_total"]
		}
		if !ok {
			continue
		}
		md := &m.cat.Metrics[j]
		bound(j)
		if len(md.Engines) == 1 {
			if md.Engines[0] == EngineV0 {
				if v0Only == "" || md.Name < v0Only {
					v0Only = md.Name
				}
			} else if v1Only == "" || md.Name < v1Only {
				v1Only = md.Name
			}
		}
	}
	if v0Only != "" {
		v0 = append(v0, "v0-only family "+v0Only)
	}
	if v1Only != "" {
		v1 = append(v1, "v1-only family "+v1Only)
	}
	if engineLabel {
		v1 = append(v1, "engine label")
		if !haveLower || lower.less(engineLabelSince) {
			lower, haveLower = engineLabelSince, true
		}
	}
	running := m.cat.Roles().Family(RoleRequestsRunning)
	if i, ok := index[running]; ok {
		switch help := in[i].Help; {
		case strings.Contains(help, "running on GPU"):
			v0 = append(v0, "V0 help text of "+running)
		case strings.Contains(help, "model execution batches"):
			v1 = append(v1, "V1 help text of "+running)
		}
	}

	conflict := len(v0) > 0 && len(v1) > 0
	info := UpstreamInfo{Engine: EngineUnknown, Labels: map[string]string{}}
	switch {
	case !anyVLLM:
		info.Labels["evidence"] = "no " + m.cat.Prefix + " families"
	case conflict:
		info.Labels["evidence"] = "conflicting: " + v0[0] + "; " + v1[0]
	case len(v0) > 0:
		info.Engine = EngineV0
		info.Labels["evidence"] = v0[0]
	case len(v1) > 0:
		info.Engine = EngineV1
		info.Labels["evidence"] = v1[0]
	default:
		info.Labels["evidence"] = "only families both engines print"
	}
	switch {
	case conflict:
		// A page with both engines' families is a composite; no single
		// release printed it, so no hint is given.
	case haveLower && haveUpper && lower.less(upper):
		info.Labels["version_hint"] = ">=" + lower.String() + ",<" + upper.String()
	case haveLower && !haveUpper:
		info.Labels["version_hint"] = ">=" + lower.String()
	case haveUpper && !haveLower:
		info.Labels["version_hint"] = "<" + upper.String()
	}
	return info
}

// Names of the families StatusFamilies returns.
const (
	MetricStatusName = "vllm_normalizer_metric_status"
	UpstreamInfoName = "vllm_normalizer_upstream_info"
)

// StatusFamilies renders a Report as two gauge families: one series per
// catalogue metric with its status, and one series describing the upstream.
func StatusFamilies(r Report) []exposition.Family {
	st := exposition.Family{
		Name: MetricStatusName,
		Type: model.MetricTypeGauge,
		Help: "Always 1. Status in the last scrape of each vLLM metric vllm-normalizer knows: " +
			"present = a current name that is served (from the upstream's own series or mapped from a legacy name); " +
			"renamed = a legacy name this upstream prints, served as printed and also as the metric named by replacement; " +
			"superseded = a legacy name this upstream does not print, whose data is in the metric named by replacement; " +
			"legacy = removed by vLLM without successor but still exposed by this upstream, passed through: nothing replaces it (replacement empty), so what reads it loses it at an upgrade, with nothing to move to; " +
			"removed = removed by vLLM without successor and not exposed here; " +
			"absent = a current name this upstream does not expose; " +
			"on a server other than vLLM: mapped = a vLLM name whose role the server fills, served from its own family (source); " +
			"foreign = every vLLM name the server has no counterpart for, in one series (metric=\"vllm:*\").",
		Samples: make([]exposition.Sample, 0, len(r.Statuses)),
	}
	for _, s := range r.Statuses {
		l := labels.FromStrings(model.MetricNameLabel, MetricStatusName,
			"metric", s.Metric, "replacement", s.Replacement, "status", s.Status)
		if s.Source != "" {
			l = labels.FromStrings(model.MetricNameLabel, MetricStatusName,
				"metric", s.Metric, "replacement", s.Replacement, "source", s.Source, "status", s.Status)
		}
		st.Samples = append(st.Samples, exposition.Sample{Labels: l, Value: 1})
	}

	lm := map[string]string{}
	maps.Copy(lm, r.Upstream.Labels)
	lm["server"] = cmp.Or(r.Upstream.Server, ServerUnknown)
	if r.Upstream.Server == ServerVLLM || r.Upstream.Server == "" {
		lm["engine"] = cmp.Or(r.Upstream.Engine, EngineUnknown)
	}
	if r.Upstream.Frontend != "" {
		lm["frontend"] = r.Upstream.Frontend
	}
	if r.Upstream.Role != "" {
		lm[LabelRole] = r.Upstream.Role
	}
	lm[model.MetricNameLabel] = UpstreamInfoName
	up := exposition.Family{
		Name: UpstreamInfoName,
		Type: model.MetricTypeGauge,
		Help: "Always 1. The server that printed the last scraped page (server: vllm, sglang, trtllm, llamacpp, dynamo, or unknown);" +
			" for vLLM the engine (v0, v1, or unknown when the page has no engine-specific evidence or evidence for both)" +
			" and the frontend (python, or rust for the OpenMetrics-only Rust frontend), the pod role (role: prefill, decode or both, from --upstream.role), the evidence used, and, when the families" +
			" on the page bound it, version_hint: the vLLM release range in which all of them existed.",
		Samples: []exposition.Sample{{Labels: labels.FromMap(lm), Value: 1}},
	}
	return []exposition.Family{st, up}
}

// Frontends of vLLM, as vllm_normalizer_upstream_info{frontend} says.
const (
	FrontendPython = "python"
	FrontendRust   = "rust"
)

// SetServer records which server printed the page, as Detection found it
// (no profile: unknown) and, for vLLM, the frontend: the Rust frontend
// answers OpenMetrics whatever the request asks for, while the Python one
// answers the text format the sidecar asks for first. What was odd on the
// page (families of another server, a tie) goes into the evidence label.
func (r *Report) SetServer(d Detection, openMetrics bool) {
	if r.Upstream.Labels == nil {
		r.Upstream.Labels = map[string]string{}
	}
	p := d.Profile
	if p == nil {
		r.Upstream.Server = ServerUnknown
		if d.Tie != "" {
			r.Upstream.Labels["evidence"] = "as much evidence for " + d.Tie + "; read as neither"
			delete(r.Upstream.Labels, "version_hint")
		}
		return
	}
	r.Upstream.Server = p.Server
	if p.Server != ServerVLLM {
		r.Upstream.Engine = ""
		if d.Odd != "" {
			// The vLLM engine evidence and release hint are about the
			// stray families, not about this server.
			r.Upstream.Labels["evidence"] = "most families are " + p.Server + "'s; also " + d.Odd
			delete(r.Upstream.Labels, "version_hint")
		}
		return
	}
	if d.Odd != "" {
		r.Upstream.Labels["evidence"] += "; also " + d.Odd
	}
	r.Upstream.Frontend = FrontendPython
	if openMetrics {
		r.Upstream.Frontend = FrontendRust
	}
}

// Statuses for a page of a server other than vLLM (FitServer).
const (
	StatusMapped  = "mapped"  // a vLLM name whose role this server fills: served from its own family (source)
	StatusForeign = "foreign" // the vLLM names this server has no counterpart for, in one series (metric ForeignMetric)
)

// ForeignMetric is the metric label of the one series that stands for every
// vLLM name foreign to the server.
const ForeignMetric = "vllm:*"

// FitServer makes the statuses fit the server that printed the page, once
// SetServer has named it: on a server other than vLLM, a current vLLM name
// whose role the profile fills from a family on fams is mapped, with that
// family as its source; every other vLLM name is foreign to the server, and
// they are summarised in one series instead of one absent or removed
// series each. On a vLLM page, or without a profile, nothing changes.
func (r *Report) FitServer(p *Profile, roles *Roles, fams []exposition.Family) {
	if p == nil || p.Server == ServerVLLM || p.RolesFromCatalogue {
		return
	}
	has := make(map[string]bool, len(fams))
	for _, f := range fams {
		has[f.Name] = true
	}
	source := map[string]string{} // canonical vLLM name -> the page's family
	for _, d := range roles.All() {
		if d.Computed || d.Family == "" {
			continue
		}
		for _, b := range p.Roles {
			if b.Role != d.Name || source[d.Family] != "" {
				continue
			}
			for _, pre := range p.Detect.Prefixes {
				if has[pre+b.Family] {
					source[d.Family] = pre + b.Family
					break
				}
			}
		}
	}
	out := make([]Status, 0, len(source)+1)
	foreign := false
	for _, s := range r.Statuses {
		if src := source[s.Metric]; src != "" {
			out = append(out, Status{Metric: s.Metric, Status: StatusMapped, Source: src})
			continue
		}
		foreign = true
	}
	if foreign {
		out = append(out, Status{Metric: ForeignMetric, Status: StatusForeign})
	}
	r.Statuses = out
}
