package diagnosis

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// APIHandler serves the latest report as JSON (/api/v1/diagnosis).
func (d *Diagnoser) APIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !getOrHead(w, r) {
			return
		}
		b, err := json.MarshalIndent(d.Report(), "", "  ")
		if err != nil {
			http.Error(w, "cannot encode the diagnosis: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if r.Method != http.MethodHead {
			_, _ = w.Write(append(b, '\n'))
		}
	})
}

// PageHandler serves the latest report as an HTML page with inline SVG
// charts (/diagnosis). It loads nothing from elsewhere: clusters are often
// offline, and the page has no script at all.
func (d *Diagnoser) PageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !getOrHead(w, r) {
			return
		}
		var b bytes.Buffer
		if err := pageTemplate.Execute(&b, pageData(d.Report())); err != nil {
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
	"num":   formatNumber,
	"ratio": formatRatio,
	"sub":   func(a, b float64) float64 { return a - b },
}).Parse(pageHTML))

// page is what the template renders.
type page struct {
	*Report
	Models []modelPage
}

type modelPage struct {
	*ModelReport
	Active []string // active symptoms and causes, for the verdict banner
	Steps  []stepPage
}

type stepPage struct {
	*Step
	Signals []signalPage
}

type signalPage struct {
	*SignalReport
	Chart chartSVG
}

func pageData(r *Report) page {
	p := page{Report: r}
	for i := range r.Models {
		mr := &r.Models[i]
		mp := modelPage{ModelReport: mr}
		for _, f := range append(append([]Finding{}, mr.Symptoms...), mr.Causes...) {
			if f.Active {
				mp.Active = append(mp.Active, f.Name)
			}
		}
		for j := range mr.Steps {
			st := &mr.Steps[j]
			sp := stepPage{Step: st}
			for k := range st.Signals {
				s := &st.Signals[k]
				sp.Signals = append(sp.Signals, signalPage{SignalReport: s, Chart: drawChart(s, mr.RecentStart)})
			}
			mp.Steps = append(mp.Steps, sp)
		}
		p.Models = append(p.Models, mp)
	}
	return p
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH = 360.0, 90.0
	chartPad       = 4.0
)

// chartSVG is one signal's chart, laid out: polylines of the signal's
// values (broken where undefined), the recent window shaded, and the
// baseline and recent values as dashed lines over their windows.
type chartSVG struct {
	Lines                  []string // points attributes
	RecentX                float64
	BaselineY, RecentY     float64
	HasBaseline, HasRecent bool
	Max                    string // top of the y axis, labelled
	Empty                  bool
}

func drawChart(s *SignalReport, recentStart float64) chartSVG {
	c := chartSVG{Empty: true}
	if len(s.Chart) < 2 {
		return c
	}
	t0, t1 := s.Chart[0].T, s.Chart[len(s.Chart)-1].T
	if !(t1 > t0) {
		return c
	}
	top := 0.0
	for _, p := range s.Chart {
		if p.V != nil {
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
	x := func(t float64) float64 { return chartPad + (chartW-2*chartPad)*(t-t0)/(t1-t0) }
	y := func(v float64) float64 { return chartH - chartPad - (chartH-2*chartPad)*v/top }
	var cur []string
	flush := func() {
		if len(cur) > 1 {
			c.Lines = append(c.Lines, strings.Join(cur, " "))
		}
		cur = cur[:0]
	}
	for _, p := range s.Chart {
		if p.V == nil {
			flush()
			continue
		}
		cur = append(cur, fmt.Sprintf("%.1f,%.1f", x(p.T), y(*p.V)))
	}
	flush()
	c.Empty = len(c.Lines) == 0
	c.RecentX = x(math.Min(math.Max(recentStart, t0), t1))
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
	switch {
	case s.Ratio != nil:
		return strconv.FormatFloat(*s.Ratio, 'f', 2, 64) + "×"
	case s.Change == ChangeUp:
		return "up from 0"
	}
	return "–"
}
