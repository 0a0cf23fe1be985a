package diagnosis

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fos-study/vllm-normalizer/mapping"
)

// APIHandler serves the latest report as JSON (/api/v1/diagnosis): every
// model, or those ?model= names, the charts of MaxChartedModels of them.
func (d *Diagnoser) APIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !getOrHead(w, r) {
			return
		}
		rep := d.View(r.URL.Query()["model"])
		// The report without its models, whose place is cut out to write
		// them one at a time: a thousand models were 10 MB encoded at once.
		head := *rep
		head.Models = []ModelReport{}
		b, err := json.MarshalIndent(&head, "", "  ")
		if err != nil {
			http.Error(w, "cannot encode the diagnosis: "+err.Error(), http.StatusInternalServerError)
			return
		}
		cut := bytes.Index(b, []byte(`"models": []`)) + len(`"models": [`)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b[:cut])
		for i := range rep.Models {
			m, err := json.MarshalIndent(&rep.Models[i], "    ", "  ")
			if err != nil {
				return // cannot happen for these types; the response is cut short
			}
			sep := ",\n    "
			if i == 0 {
				sep = "\n    "
			}
			_, _ = io.WriteString(w, sep)
			_, _ = w.Write(m)
		}
		if len(rep.Models) > 0 {
			_, _ = io.WriteString(w, "\n  ")
		}
		_, _ = w.Write(b[cut:])
		_, _ = io.WriteString(w, "\n")
	})
}

// PageHandler serves the latest report as an HTML page with inline SVG
// charts (/diagnosis). It loads nothing from elsewhere: clusters are often
// offline, and the page has no script at all; ?refresh=N (seconds) makes
// the browser reload it; ?model= shows only the models it names (with
// their charts, as APIHandler).
func (d *Diagnoser) PageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !getOrHead(w, r) {
			return
		}
		pd := pageData(d.View(r.URL.Query()["model"]))
		if n, err := strconv.Atoi(r.URL.Query().Get("refresh")); err == nil && n >= 1 && n <= 3600 {
			pd.Refresh = n
		}
		var b bytes.Buffer
		if err := pageTemplate.Execute(&b, pd); err != nil {
			http.Error(w, "cannot render the diagnosis: "+err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		// Nothing but this page's own inline style; no script.
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:")
		if r.Method != http.MethodHead {
			_, _ = w.Write(b.Bytes())
		}
	})
}

func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

//go:embed page.html
var pageHTML string

var pageTemplate = template.Must(template.New("diagnosis").Funcs(template.FuncMap{
	"num":         formatNumber,
	"share":       func(v *float64) string { return fmt.Sprintf("%.0f %%", 100**v) },
	"ratio":       formatRatio,
	"sub":         func(a, b float64) float64 { return a - b },
	"pval":        formatP,
	"clock":       func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"maxCharted":  func() int { return MaxChartedModels },
	"withheldWhy": func() string { return withheldWhy },
}).Parse(pageHTML))

// page is what the template renders.
type page struct {
	*Report
	Title   string
	Refresh int
	Models  []modelPage
}

type modelPage struct {
	*ModelReport
	Steps []stepPage
	// SLO is the state of the latency targets, when set.
	SLO string
	// BaselineSpan says what the baseline is: rolling or frozen, from when.
	BaselineSpan string
	// Uncharted: the model's charts were left out (beyond MaxChartedModels).
	Uncharted bool
}

type stepPage struct {
	*Step
	Signals []signalPage
}

type signalPage struct {
	*SignalReport
	Chart   chartSVG
	NoChart bool // a topology signal, judged now only
}

// serverTitles are the servers' names as people write them, by profile.
var serverTitles = mapping.ServerTitles()

// title names the server kind the models run on, one or several.
func title(r *Report) string {
	kinds := map[string]bool{}
	for _, m := range r.Models {
		if m.Server != "" && m.Server != "unknown" {
			kinds[m.Server] = true
		}
	}
	if len(kinds) != 1 {
		return "LLM server diagnosis"
	}
	for k := range kinds {
		if t := serverTitles[k]; t != "" {
			return t + " diagnosis"
		}
		return k + " diagnosis"
	}
	return ""
}

func pageData(r *Report) page {
	p := page{Report: r, Title: title(r)}
	for i := range r.Models {
		mr := &r.Models[i]
		mp := modelPage{ModelReport: mr, SLO: sloState(r.SLO, mr), Uncharted: mr.ChartEnd == 0}
		if mr.Baseline.Start != nil {
			end := mr.Baseline.Start.Add(time.Duration(mr.Baseline.Seconds * float64(time.Second)))
			kind := "rolling"
			switch {
			case mr.Baseline.Frozen && mr.Incident == nil && mr.Baseline.Thin:
				// an incident on a starved reference, not yet shown
				// beyond what so little calm can tell (Baseline.Thin)
				kind = "frozen while a change is checked; too little calm to judge it yet"
			case mr.Baseline.Frozen && mr.Incident == nil:
				// opened, not named: a flash, or a traffic change whose
				// latency has not moved (yet)
				kind = "frozen while a change is checked"
			case mr.Baseline.Frozen && mr.Baseline.Stretches > 1:
				kind = fmt.Sprintf("frozen at the incident's start: %d stretches without an incident", mr.Baseline.Stretches)
			case mr.Baseline.Frozen:
				kind = "frozen at the incident's start"
			case mr.Baseline.Stretches > 1:
				kind = fmt.Sprintf("%d stretches without an incident", mr.Baseline.Stretches)
			}
			mp.BaselineSpan = fmt.Sprintf("baseline %s–%s (%s)", mr.Baseline.Start.UTC().Format("15:04:05"), end.UTC().Format("15:04:05"), kind)
		}
		incidentStart := math.NaN()
		if mr.Incident != nil {
			incidentStart = unixSeconds(mr.Incident.Start)
		}
		// A model beyond MaxChartedModels shows its verdict only: its steps
		// were 7 KB of HTML a model, 7.2 MB a page for a thousand.
		for j := range mr.Steps {
			if mp.Uncharted {
				break
			}
			st := &mr.Steps[j]
			sp := stepPage{Step: st}
			for k := range st.Signals {
				s := &st.Signals[k]
				sp.Signals = append(sp.Signals, signalPage{SignalReport: s, Chart: drawChart(s, mr, incidentStart), NoChart: s.index < 0 || mp.Uncharted})
			}
			mp.Steps = append(mp.Steps, sp)
		}
		p.Models = append(p.Models, mp)
	}
	return p
}

// sloState compares the recent percentiles with the targets.
func sloState(slo *SLOReport, mr *ModelReport) string {
	if slo == nil || len(mr.Steps) == 0 {
		return ""
	}
	var held, missed []string
	check := func(name string, target *float64, idx int) {
		if target == nil {
			return
		}
		for _, s := range mr.Steps[0].Signals {
			if s.index != idx || s.Recent == nil {
				continue
			}
			w := fmt.Sprintf("%s p90 %s s against the %s s target", name, formatNumber(s.Recent), formatNumber(target))
			if *s.Recent <= *target {
				held = append(held, w)
			} else {
				missed = append(missed, w)
			}
		}
	}
	check("time to first token", slo.TTFT, sTTFT)
	check("inter-token latency", slo.TPOT, sITL)
	switch {
	case len(missed) > 0:
		return "SLO missed: " + strings.Join(missed, "; ") + "."
	case len(held) > 0:
		return "SLOs hold: " + strings.Join(held, "; ") + "."
	}
	return ""
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 360.0, 104.0
	plotH          = 86.0 // above the time axis
	chartPad       = 4.0
)

// chartSVG is one signal's chart, laid out over the model's chart span:
// polylines of the signal's values (broken where undefined), the recent
// window shaded, the baseline and recent values as dashed lines, a time
// axis, and the incident's start marked.
type chartSVG struct {
	Lines                  []string // points attributes
	RecentX                float64
	BaselineY, RecentY     float64
	HasBaseline, HasRecent bool
	Max                    string // top of the y axis, labelled
	Empty                  bool
	Ticks                  []tick
	IncidentX              float64
	HasIncident            bool
	AxisY                  float64
}

type tick struct {
	X     float64
	Label string
}

// tickSteps are the time axis' candidate steps, seconds.
var tickSteps = []float64{5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200}

func drawChart(s *SignalReport, mr *ModelReport, incidentStart float64) chartSVG {
	c := chartSVG{Empty: true, AxisY: plotH}
	t0, t1 := mr.ChartStart, mr.ChartEnd
	if !(t1 > t0) {
		return c
	}
	x := func(t float64) float64 { return chartPad + (chartW-2*chartPad)*(t-t0)/(t1-t0) }
	step := tickSteps[len(tickSteps)-1]
	for _, st := range tickSteps {
		if (t1-t0)/st <= 6 {
			step = st
			break
		}
	}
	for t := math.Ceil(t0/step) * step; t <= t1; t += step {
		layout := "15:04"
		if step < 60 {
			layout = "15:04:05"
		}
		c.Ticks = append(c.Ticks, tick{X: x(t), Label: time.Unix(int64(t), 0).UTC().Format(layout)})
	}
	if incidentStart >= t0 && incidentStart <= t1 {
		c.HasIncident, c.IncidentX = true, x(incidentStart)
	}
	c.RecentX = x(math.Min(math.Max(mr.RecentStart, t0), t1))
	top := 0.0
	for _, p := range s.Chart {
		if p.V != nil && p.T >= t0 {
			top = math.Max(top, *p.V)
		}
	}
	for _, v := range []*float64{s.Recent, s.Baseline} {
		if v != nil {
			top = math.Max(top, *v)
		}
	}
	if top <= 0 {
		top = 1
	}
	top *= 1.1
	y := func(v float64) float64 { return plotH - chartPad - (plotH-2*chartPad)*v/top }
	var cur []string
	flush := func() {
		if len(cur) > 1 {
			c.Lines = append(c.Lines, strings.Join(cur, " "))
		}
		cur = cur[:0]
	}
	for _, p := range s.Chart {
		if p.V == nil || p.T < t0 {
			flush()
			continue
		}
		cur = append(cur, fmt.Sprintf("%.1f,%.1f", x(p.T), y(*p.V)))
	}
	flush()
	c.Empty = len(c.Lines) == 0
	if s.Baseline != nil {
		c.HasBaseline, c.BaselineY = true, y(*s.Baseline)
	}
	if s.Recent != nil {
		c.HasRecent, c.RecentY = true, y(*s.Recent)
	}
	c.Max = formatNumber(&top)
	return c
}

func formatNumber(v *float64) string {
	if v == nil {
		return "–"
	}
	a := math.Abs(*v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000 || *v == math.Trunc(*v):
		return strconv.FormatFloat(*v, 'f', 0, 64)
	case a >= 1:
		return strconv.FormatFloat(*v, 'f', 2, 64)
	}
	return strconv.FormatFloat(*v, 'g', 3, 64)
}

func formatRatio(s *SignalReport) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	switch {
	case s.Ratio != nil && s.RatioLow != nil && s.RatioHigh != nil:
		// a quantile: what its buckets allow, beside the interpolated reading
		return f(*s.Ratio) + "× (buckets: " + f(*s.RatioLow) + "–" + f(*s.RatioHigh) + "×)"
	case s.Ratio != nil && s.RatioLow != nil:
		return f(*s.Ratio) + "× (buckets: from " + f(*s.RatioLow) + "×)"
	case s.Ratio != nil:
		return f(*s.Ratio) + "×"
	case s.Change == ChangeUp:
		return "up from 0"
	}
	return "–"
}

func formatP(v *float64) string {
	if v == nil {
		return "–"
	}
	if *v < 1e-4 {
		return "p < 0.0001"
	}
	return "p = " + strconv.FormatFloat(*v, 'g', 2, 64)
}
