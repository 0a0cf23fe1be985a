package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fos-study/vllm-normalizer/internal/nhcb"
	"github.com/fos-study/vllm-normalizer/mapping"
)

//go:generate go test -run TestGeneratedFilesUpToDate -update .

// datasourceRef points every panel and query at the dashboard's datasource
// variable, so the same JSON works for UI import and for provisioning.
type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

var promDS = &datasourceRef{Type: "prometheus", UID: "${datasource}"}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one PromQL query of a panel.
type Target struct {
	Datasource   *datasourceRef `json:"datasource"`
	RefID        string         `json:"refId"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat,omitempty"`
	Instant      bool           `json:"instant,omitempty"`
	Range        bool           `json:"range"`
	Format       string         `json:"format,omitempty"`
}

// Panel is a Grafana panel (or a row, when Type is "row").
type Panel struct {
	ID              int              `json:"id"`
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	Description     string           `json:"description,omitempty"`
	Datasource      *datasourceRef   `json:"datasource,omitempty"`
	GridPos         gridPos          `json:"gridPos"`
	Collapsed       *bool            `json:"collapsed,omitempty"`
	Panels          []any            `json:"panels,omitempty"`
	Targets         []Target         `json:"targets,omitempty"`
	FieldConfig     *fieldConfig     `json:"fieldConfig,omitempty"`
	Options         map[string]any   `json:"options,omitempty"`
	Transformations []map[string]any `json:"transformations,omitempty"`
}

type fieldConfig struct {
	Defaults  map[string]any   `json:"defaults"`
	Overrides []map[string]any `json:"overrides"`
}

// Variable is a dashboard template variable.
type Variable struct {
	Name        string         `json:"name"`
	Label       string         `json:"label,omitempty"`
	Type        string         `json:"type"`
	Description string         `json:"description,omitempty"`
	Datasource  *datasourceRef `json:"datasource,omitempty"`
	Query       any            `json:"query"`
	Definition  string         `json:"definition,omitempty"`
	Current     map[string]any `json:"current"`
	Options     []any          `json:"options"`
	Hide        int            `json:"hide"`
	IncludeAll  bool           `json:"includeAll"`
	AllValue    string         `json:"allValue,omitempty"`
	Multi       bool           `json:"multi"`
	Refresh     int            `json:"refresh,omitempty"`
	Regex       string         `json:"regex"`
	Sort        int            `json:"sort,omitempty"`
}

// Dashboard is the subset of the Grafana dashboard model we emit.
type Dashboard struct {
	UID           string         `json:"uid"`
	Title         string         `json:"title"`
	Description   string         `json:"description"`
	Tags          []string       `json:"tags"`
	Editable      bool           `json:"editable"`
	GraphTooltip  int            `json:"graphTooltip"`
	Refresh       string         `json:"refresh"`
	SchemaVersion int            `json:"schemaVersion"`
	Version       int            `json:"version"`
	Time          map[string]any `json:"time"`
	Timezone      string         `json:"timezone"`
	Annotations   map[string]any `json:"annotations"`
	Links         []any          `json:"links"`
	Templating    map[string]any `json:"templating"`
	Panels        []Panel        `json:"panels"`
}

// Render returns the indented JSON of a dashboard, ending in a newline.
func Render(d Dashboard) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ---- builder ---------------------------------------------------------------

// layout places panels left to right in a 24-column grid, rows top to bottom.
type layout struct {
	id     int
	x, y   int
	rowH   int
	panels []Panel
}

func (l *layout) nextID() int { l.id++; return l.id }

func (l *layout) row(title string) {
	l.newLine()
	collapsed := false
	l.panels = append(l.panels, Panel{
		ID: l.nextID(), Type: "row", Title: title,
		GridPos: gridPos{H: 1, W: 24, X: 0, Y: l.y}, Collapsed: &collapsed,
	})
	l.y++
}

func (l *layout) newLine() {
	if l.x > 0 {
		l.x = 0
		l.y += l.rowH
		l.rowH = 0
	}
}

func (l *layout) add(p Panel, w, h int) {
	if l.x+w > 24 {
		l.newLine()
	}
	p.ID = l.nextID()
	p.GridPos = gridPos{H: h, W: w, X: l.x, Y: l.y}
	if p.Datasource == nil {
		p.Datasource = promDS
	}
	for i := range p.Targets {
		p.Targets[i].Datasource = promDS
		p.Targets[i].RefID = string(rune('A' + i))
	}
	l.panels = append(l.panels, p)
	l.x += w
	if h > l.rowH {
		l.rowH = h
	}
}

func q(expr, legend string) Target { return Target{Expr: expr, LegendFormat: legend, Range: true} }

// classicOrNative is expr, reading the raw vLLM histograms, or the same read
// as Prometheus 3 stores them natively (convert_classic_histograms_to_nhcb).
func classicOrNative(expr string) string {
	// Grafana's range variable is no PromQL duration: a stand-in no query
	// here uses while the expression is parsed.
	const rateInterval, standIn = "$__rate_interval", "7y"
	e, err := nhcb.Either(strings.ReplaceAll(expr, rateInterval, standIn), isHistogram)
	if err != nil {
		panic(err) // a dashboard query written here: fixed by writing it otherwise
	}
	return strings.ReplaceAll(e, standIn, rateInterval)
}

// isHistogram says whether a family is one of the catalogue's histograms.
var isHistogram = func() func(string) bool {
	cat, err := mapping.LoadCatalogue()
	if err != nil {
		panic(err)
	}
	return cat.Roles().IsHistogram
}()

// instant is a table query evaluated at the end of the time range.
func instant(expr string) Target {
	return Target{Expr: expr, Instant: true, Format: "table"}
}

type tsOpt struct {
	unit      string
	min, max  *float64
	stack     bool
	overrides []map[string]any
	bars      bool
}

func f(v float64) *float64 { return new(v) }

func timeseries(title, desc string, o tsOpt, targets ...Target) Panel {
	defaults := map[string]any{
		"unit": o.unit,
		"custom": map[string]any{
			"drawStyle":   "line",
			"lineWidth":   1,
			"fillOpacity": 10,
			"showPoints":  "never",
			"spanNulls":   false,
			"stacking":    map[string]any{"mode": "none", "group": "A"},
		},
	}
	if o.stack {
		defaults["custom"].(map[string]any)["stacking"] = map[string]any{"mode": "normal", "group": "A"}
	}
	if o.bars {
		defaults["custom"].(map[string]any)["drawStyle"] = "bars"
		defaults["custom"].(map[string]any)["fillOpacity"] = 60
	}
	if o.min != nil {
		defaults["min"] = *o.min
	}
	if o.max != nil {
		defaults["max"] = *o.max
	}
	overrides := o.overrides
	if overrides == nil {
		overrides = []map[string]any{}
	}
	return Panel{
		Type: "timeseries", Title: title, Description: desc, Targets: targets,
		FieldConfig: &fieldConfig{Defaults: defaults, Overrides: overrides},
		Options: map[string]any{
			"legend":  map[string]any{"showLegend": true, "displayMode": "table", "placement": "bottom", "calcs": []string{"lastNotNull", "max"}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		},
	}
}

// stat shows the last value of each series, with optional value mappings.
func stat(title, desc, unit string, mappings []any, thresholds []any, targets ...Target) Panel {
	if mappings == nil {
		mappings = []any{}
	}
	if thresholds == nil {
		thresholds = []any{map[string]any{"color": "green", "value": nil}}
	}
	return Panel{
		Type: "stat", Title: title, Description: desc, Targets: targets,
		FieldConfig: &fieldConfig{
			Defaults: map[string]any{
				"unit":       unit,
				"mappings":   mappings,
				"thresholds": map[string]any{"mode": "absolute", "steps": thresholds},
				"color":      map[string]any{"mode": "thresholds"},
			},
			Overrides: []map[string]any{},
		},
		Options: map[string]any{
			"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode":     "background",
			"graphMode":     "none",
			"justifyMode":   "auto",
			"textMode":      "value_and_name",
			"orientation":   "auto",
		},
	}
}

// table shows instant queries; with several targets the results are merged
// on their common labels and each value column renamed.
func table(title, desc string, hide []string, rename map[string]string, targets ...Target) Panel {
	excl := map[string]bool{"Time": true}
	for _, h := range hide {
		excl[h] = true
	}
	tr := []map[string]any{}
	if len(targets) > 1 {
		tr = append(tr, map[string]any{"id": "merge", "options": map[string]any{}})
	}
	if rename == nil {
		rename = map[string]string{}
	}
	tr = append(tr, map[string]any{"id": "organize", "options": map[string]any{
		"excludeByName": excl,
		"renameByName":  rename,
	}})
	return Panel{
		Type: "table", Title: title, Description: desc, Targets: targets,
		FieldConfig: &fieldConfig{
			Defaults:  map[string]any{"custom": map[string]any{"align": "auto", "filterable": true}},
			Overrides: []map[string]any{},
		},
		Options:         map[string]any{"showHeader": true, "cellHeight": "sm", "footer": map[string]any{"show": false}},
		Transformations: tr,
	}
}

// heatmap shows the per-interval distribution of a histogram's buckets.
func heatmap(title, desc, unit string, target Target) Panel {
	target.Format = "heatmap"
	return Panel{
		Type: "heatmap", Title: title, Description: desc, Targets: []Target{target},
		FieldConfig: &fieldConfig{Defaults: map[string]any{}, Overrides: []map[string]any{}},
		Options: map[string]any{
			"calculate":    false,
			"cellGap":      1,
			"color":        map[string]any{"mode": "scheme", "scheme": "Oranges", "scale": "exponential", "exponent": 0.5, "steps": 64},
			"yAxis":        map[string]any{"axisPlacement": "left", "unit": unit},
			"rowsFrame":    map[string]any{"layout": "auto"},
			"tooltip":      map[string]any{"mode": "single", "yHistogram": true},
			"legend":       map[string]any{"show": true},
			"filterValues": map[string]any{"le": 1e-9},
		},
	}
}

// rightAxis moves the series whose display name matches regex to a right
// y axis with its own unit.
func rightAxis(regex, unit string) map[string]any {
	return map[string]any{
		"matcher": map[string]any{"id": "byRegexp", "options": regex},
		"properties": []any{
			map[string]any{"id": "custom.axisPlacement", "value": "right"},
			map[string]any{"id": "unit", "value": unit},
		},
	}
}

// ---- variables ---------------------------------------------------------------

func datasourceVar() Variable {
	return Variable{
		Name: "datasource", Label: "Data source", Type: "datasource", Query: "prometheus",
		Description: "Prometheus that scrapes the vllm-normalizer sidecars.",
		Current:     map[string]any{}, Options: []any{}, Refresh: 1,
	}
}

func labelValuesVar(name, label, metricSelector, desc string) Variable {
	def := fmt.Sprintf("label_values(%s, %s)", metricSelector, name)
	return Variable{
		Name: name, Label: label, Type: "query", Description: desc,
		Datasource: promDS,
		Query:      map[string]any{"query": def, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1},
		Definition: def,
		Current:    map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		Options:    []any{},
		IncludeAll: true, AllValue: ".*", Multi: true, Refresh: 2, Sort: 1,
	}
}

func windowVar() Variable {
	return Variable{
		Name: "window", Label: "Derived window", Type: "custom", Query: "1m,5m",
		Description: "Window of the sidecar's derived gauges (their window label).",
		Current:     map[string]any{"selected": true, "text": "1m", "value": "1m"},
		Options: []any{
			map[string]any{"selected": true, "text": "1m", "value": "1m"},
			map[string]any{"selected": false, "text": "5m", "value": "5m"},
		},
	}
}

// standardVars are the variables every dashboard carries.
func standardVars(extra ...Variable) map[string]any {
	vars := []Variable{
		datasourceVar(),
		labelValuesVar("namespace", "Namespace", `vllm_up`,
			"Kubernetes namespace of the vLLM pods (from the PodMonitor's target labels)."),
		labelValuesVar("pod", "Pod", `vllm_up{namespace=~"$namespace"}`,
			"vLLM pod; each pod runs one vllm-normalizer sidecar."),
		labelValuesVar("model_name", "Model", `vllm:num_requests_running{namespace=~"$namespace", pod=~"$pod"}`,
			"Served model name as vLLM reports it (model_name label)."),
	}
	vars = append(vars, extra...)
	return map[string]any{"list": vars}
}

// Label selectors shared by every query.
const (
	selPod   = `namespace=~"$namespace", pod=~"$pod"`
	selModel = `namespace=~"$namespace", pod=~"$pod", model_name=~"$model_name"`
	selWin   = selModel + `, window="$window"`
	inst     = "namespace, pod, model_name"
)

func newDashboard(uid, title, desc string, tags []string, vars map[string]any, panels []Panel) Dashboard {
	return Dashboard{
		UID: uid, Title: title, Description: desc,
		Tags:         append([]string{"vllm", "vllm-normalizer"}, tags...),
		Editable:     true,
		GraphTooltip: 1,
		Refresh:      "30s",
		// Grafana 10.x schema; newer Grafana migrates it on load.
		SchemaVersion: 39,
		Version:       1,
		Time:          map[string]any{"from": "now-1h", "to": "now"},
		Timezone:      "browser",
		Annotations:   map[string]any{"list": []any{}},
		Links:         []any{},
		Templating:    vars,
		Panels:        panels,
	}
}

// All returns every dashboard keyed by its file name.
func All() map[string]Dashboard {
	return map[string]Dashboard{
		"vllm-routing.json":           routing(),
		"vllm-diagnosis.json":         diagnosis(),
		"vllm-normalizer-health.json": health(),
	}
}
