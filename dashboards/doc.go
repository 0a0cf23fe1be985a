// Package dashboards builds the Grafana dashboards shipped with
// vllm-normalizer. The JSON files next to this source are generated from it
// and committed; dashboards_test.go fails when they are stale.
//
// Regenerate with:
//
//	go test ./dashboards -run TestGeneratedFilesUpToDate -update
package dashboards
