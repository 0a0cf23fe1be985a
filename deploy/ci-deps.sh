#!/usr/bin/env bash
# Installs the tools the deploy/, dashboards/ and e2e/prometheus tests need,
# on a fresh Debian machine (as root). Idempotent: tools already present are
# left alone.
#
#   prometheus, promtool - Prometheus 3.x, the release tools/prometheus
#               pins, built from the Go module proxy into $(go env GOPATH)/bin
#               (.ci/run puts that first on PATH; the tests look there first).
#               e2e/prometheus starts its own servers (temporary storage,
#               loopback port); deploy, collector and genai run promtool.
#               Built with -tags remove_all_sd (static targets only) and
#               without the web UI's assets (the API needs none). Debian's
#               package is 2.x, which users no longer run: not used.
#   python3-prometheus-client - Python's prometheus_client text parser, which
#               e2e/consumers/production-stack runs to read pages the way vLLM
#               production-stack's router does (for the system python3).
#   chromium  - the headless browser of e2e's diagnosis page test
#               (Debian package "chromium"; run with --headless --no-sandbox)
#   make      - e2e's version test runs the Makefile's build command
#               (Debian package "make")
#   golangci-lint - static analysis (.golangci.yml), built from the Go module
#               proxy at GOLANGCI_LINT_VERSION into $(go env GOPATH)/bin
#               (.ci/run puts that on PATH)
#   helm      - `helm lint` / `helm template` of deploy/helm/vllm-normalizer
#               (deploy/helm/test), Helm v4 built from the Go module proxy at
#               HELM_VERSION into $(go env GOPATH)/bin
#   kubectl   - `kubectl kustomize deploy/kubernetes` (needs embedded kustomize
#               v4 or v5, i.e. kubectl >= 1.21; the Go machine image ships one).
#               Debian 12's "kubernetes-client" is 1.20 with kustomize v2,
#               too old: the test then skips with a message instead of failing.
#
# Without these tools the corresponding Go tests skip with a message (the
# e2e/prometheus, deploy, e2e/consumers/production-stack and browser tests fail
# instead when CI=true).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
/usr/bin/python3 -c 'import prometheus_client.parser' >/dev/null 2>&1 || need_apt+=(python3-prometheus-client)
{ command -v chromium || command -v chromium-browser; } >/dev/null 2>&1 || need_apt+=(chromium)
command -v make >/dev/null 2>&1 || need_apt+=(make)
need_kubectl=false
command -v kubectl >/dev/null 2>&1 || need_kubectl=true

if [ "${#need_apt[@]}" -gt 0 ] || $need_kubectl; then
  $SUDO apt-get update
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need_apt[@]}"
fi
if $need_kubectl; then
  # Optional: the kustomize test skips without a usable kubectl.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends kubernetes-client ||
    echo "ci-deps: kubernetes-client not installable here; the kustomize test will skip"
fi

# golangci-lint: pinned, from the Go module proxy.
GOLANGCI_LINT_VERSION="v2.15.0"
gobin="$(go env GOPATH)/bin"
if ! "$gobin/golangci-lint" version 2>/dev/null | grep -q "version ${GOLANGCI_LINT_VERSION#v} "; then
  go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
fi
"$gobin/golangci-lint" version 2>&1 | head -n 1

# Prometheus and promtool: the release tools/prometheus/go.mod pins
# (module v0.3XY.Z is Prometheus 3.XY.Z), stamped with that version so the
# tests can tell it from a distribution's 2.x.
prom_module="$(awk '{ for (i = 1; i < NF; i++) if ($i == "github.com/prometheus/prometheus") print $(i + 1) }' "$root/tools/prometheus/go.mod")"
PROMETHEUS_VERSION="$(printf '%s\n' "$prom_module" | sed -E 's/^v0\.3([0-9]{2})\.([0-9]+)$/3.\1.\2/')"
case "$PROMETHEUS_VERSION" in
  3.*.*) ;;
  *) echo "ci-deps: tools/prometheus/go.mod must require github.com/prometheus/prometheus v0.3XY.Z (Prometheus 3.XY.Z); found '$prom_module'" >&2; exit 1 ;;
esac
for tool in prometheus promtool; do
  if ! "$gobin/$tool" --version 2>/dev/null | grep -q "version ${PROMETHEUS_VERSION} "; then
    (cd "$root/tools/prometheus" && go build -tags remove_all_sd \
      -ldflags "-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION}" \
      -o "$gobin/$tool" "github.com/prometheus/prometheus/cmd/$tool")
  fi
  "$gobin/$tool" --version 2>&1 | head -n 1
done

# Helm v4: pinned, from the Go module proxy (helm.sh/helm/v4).
HELM_VERSION="v4.3.2"
if ! "$gobin/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "${HELM_VERSION}"; then
  go install -ldflags "-X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"
fi
"$gobin/helm" version --template 'helm {{.Version}} ({{.GoVersion}})' && echo

/usr/bin/python3 -c 'import prometheus_client.parser; print("python3: prometheus_client parser available")'
kubectl version --client 2>/dev/null | head -n 2 || true
{ chromium --version || chromium-browser --version; } 2>/dev/null | head -n 1
