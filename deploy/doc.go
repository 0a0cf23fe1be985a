// Package deploy holds no Go code: its tests check the Prometheus rules and
// the Kubernetes manifests next to them.
package deploy
