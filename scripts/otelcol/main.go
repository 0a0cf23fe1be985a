// Command otelcol is the OpenTelemetry Collector with only the three
// components scripts/sidebyside.sh -O compares the sidecar with: the
// prometheus receiver scrapes vLLM, the metricstransform processor renames
// the legacy families (config.yaml) and the prometheus exporter serves the
// result. It is what the Collector's own builder would generate for that
// configuration, in its own module so that the product's go.mod stays free
// of the Collector's dependencies. Not built by CI.
//
//	go build -o otelcol . && ./otelcol --config=config.yaml
package main

import (
	"log"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/prometheusexporter"
	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/metricstransformprocessor"
	"github.com/open-telemetry/opentelemetry-collector-contrib/receiver/prometheusreceiver"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func factories() (otelcol.Factories, error) {
	r := prometheusreceiver.NewFactory()
	p := metricstransformprocessor.NewFactory()
	e := prometheusexporter.NewFactory()
	return otelcol.Factories{
		Receivers:  map[component.Type]receiver.Factory{r.Type(): r},
		Processors: map[component.Type]processor.Factory{p.Type(): p},
		Exporters:  map[component.Type]exporter.Factory{e.Type(): e},
		Telemetry:  otelconftelemetry.NewFactory(),
	}, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol",
			Description: "OpenTelemetry Collector for scripts/sidebyside.sh",
			Version:     "v0.165.0",
		},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory()},
				// As the Collector's builder sets it: ${NAME} reads the
				// environment.
				DefaultScheme: "env",
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
