// Package helmtest holds no code of its own: its tests render the Helm chart
// in deploy/helm/vllm-normalizer with the helm binary, decode every object
// strictly into the Kubernetes and Prometheus Operator API types, and run the
// chart's MutatingAdmissionPolicy through Kubernetes' own admission plugin on
// pod templates of llm-d, KServe and production-stack (testdata/pods).
//
// It is a module of its own so that the Kubernetes API server libraries stay
// out of the sidecar's go.mod.
package helmtest
