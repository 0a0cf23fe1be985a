//go:build tools

// Package tools pins the Prometheus server and promtool that the tests run
// (deploy/ci-deps.sh builds both from this module): the Prometheus users run
// is 3.x, so the agreement, rule and dashboard tests run on the release this
// module names, never on whatever a distribution ships.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
