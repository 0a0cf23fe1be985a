package collector

import (
	"context"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/fos-study/vllm-normalizer/exposition"
	"github.com/fos-study/vllm-normalizer/mapping"
)

// Never worse than raw, for every profile: on every page the sidecar
// serves (the full page, /metrics/routing, the compatibility page, each
// engine's page) a series under a name the server printed has a value the
// server printed for that name, model and bucket. The routing pages
// collapse a family to one series per model: where the server printed one
// engine's series (once, or repeated per rank), that is the value; a page
// of several engines is collapsed by its role's rule, tested in routing.
func TestNativeNamesKeepNativeValues(t *testing.T) {
	files, _ := filepath.Glob("../testdata/fixtures/*.prom")
	om, _ := filepath.Glob("../testdata/fixtures/*.om")
	servers := map[string]bool{}
	for _, file := range append(files, om...) {
		name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		if strings.Contains(name, "nan-ind") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			fams, _, err := exposition.Parse(raw, fixtureContentType(file), exposition.ParseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			printed := printedValues(exposition.DropCreated(fams))
			up := serveFile(t, file)
			c := newTestCollector(t, up.URL+"/metrics", newFakeClock(), func(cfg *Config) {
				// a static page: the fake interval leaves a busy machine's
				// -race run the real timeout's room (CI timed out at 1 s)
				cfg.Interval, cfg.Timeout = 15*time.Second, 15*time.Second
			})
			c.ScrapeOnce(context.Background())
			if c.lastReason != "" {
				t.Fatalf("the scrape failed: %s", c.lastReason)
			}
			full := get(t, c.MetricsHandler(), "/metrics", nil).Body.Bytes()
			for k := range samplesOf(t, full) {
				if strings.HasPrefix(k, `{__name__="vllm_normalizer_upstream_info"`) {
					servers[labelOf(k, "server")] = true
				}
			}
			pages := map[string][]byte{
				"/metrics":         full,
				"/metrics/routing": get(t, c.RoutingHandler(), "/metrics/routing", nil).Body.Bytes(),
				"compatibility":    get(t, c.CompatHandler(), "/metrics", nil).Body.Bytes(),
			}
			mux := http.NewServeMux()
			mux.Handle("/metrics/routing/engines/{engine}", c.EngineRoutingHandler())
			for _, e := range c.snap.Load().engines.engines {
				pages["engine "+e] = get(t, mux, "/metrics/routing/engines/"+e, nil).Body.Bytes()
			}
			checked, single := 0, 0
			for _, p := range printed {
				if p.engines <= 1 {
					single++
				}
			}
			for page, body := range pages {
				for k, v := range samplesOf(t, body) {
					want, ok := printed[seriesKey(k)]
					if !ok || want.engines > 1 {
						continue // not a name the server printed, or collapsed over engines
					}
					checked++
					if !slices.ContainsFunc(want.values, func(w float64) bool { return w == v || math.IsNaN(w) && math.IsNaN(v) }) {
						t.Errorf("%s: %s = %v, the server printed %v", page, k, v, want.values)
					}
				}
			}
			if checked == 0 && single > 0 {
				t.Errorf("no series of the server's own names on any page")
			}
		})
	}
	// Every built-in profile has a page here.
	for _, p := range testMapper(t, mapping.Options{}).Profiles().All() {
		if !servers[p.Server] {
			t.Errorf("no fixture is read as %s: its native names go untested", p.Server)
		}
	}
}

// printed holds what a server printed for one family sample name, model
// and bucket: its values, and how many engines printed them.
type printed struct {
	values  []float64
	engines int
}

func printedValues(fams []exposition.Family) map[string]printed {
	out := map[string]printed{}
	engines := map[string]map[string]bool{}
	for _, f := range fams {
		for _, s := range f.Samples {
			k := seriesKey(s.Labels.String())
			p := out[k]
			p.values = append(p.values, s.Value)
			if engines[k] == nil {
				engines[k] = map[string]bool{}
			}
			// Any label that names an engine in some profile.
			engines[k][s.Labels.Get("engine")+"/"+s.Labels.Get("dp_rank")] = true
			p.engines = len(engines[k])
			out[k] = p
		}
	}
	return out
}

// seriesKey is a series reduced to its sample name, model_name and le.
func seriesKey(series string) string {
	return labelOf(series, model.MetricNameLabel) + "|" + labelOf(series, "model_name") + "|" + labelOf(series, model.BucketLabel)
}

// labelOf reads one label's value from a series key as Labels.String (and
// the pagetest helpers) print it.
func labelOf(series, name string) string {
	i := strings.Index(series, name+`="`)
	for i > 0 && series[i-1] != '{' && series[i-1] != ' ' {
		j := strings.Index(series[i+1:], name+`="`)
		if j < 0 {
			return ""
		}
		i += 1 + j
	}
	if i < 0 {
		return ""
	}
	rest := series[i+len(name)+2:]
	return rest[:strings.Index(rest, `"`)]
}
