#!/usr/bin/env bash
# Installs the tools the deploy/, dashboards/ and e2e/prometheus tests need,
# on a fresh Debian machine (as root). Idempotent: tools already present are
# left alone.
#
#   promtool  - `promtool check rules` / `promtool test rules`, and
#               `promtool check metrics` on the GenAI view (genai)
#               (Debian package "prometheus", which ships promtool)
#   prometheus - the server of the same package; e2e/prometheus starts its
#               own instances (temporary storage, loopback port). The
#               package's system service is never started: a policy-rc.d
#               refuses it during the install.
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
# e2e/prometheus, e2e/consumers/production-stack and browser tests fail
# instead when CI=true).
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || need_apt+=(prometheus)
/usr/bin/python3 -c 'import prometheus_client.parser' >/dev/null 2>&1 || need_apt+=(python3-prometheus-client)
{ command -v chromium || command -v chromium-browser; } >/dev/null 2>&1 || need_apt+=(chromium)
command -v make >/dev/null 2>&1 || need_apt+=(make)
need_kubectl=false
command -v kubectl >/dev/null 2>&1 || need_kubectl=true

if [ "${#need_apt[@]}" -gt 0 ] || $need_kubectl; then
  $SUDO apt-get update
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  # Keep the package's prometheus service from starting (exit 101 = action
  # forbidden), unless the machine already has a policy of its own.
  own_policy=false
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    own_policy=true
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need_apt[@]}"
  if $own_policy; then $SUDO rm -f /usr/sbin/policy-rc.d; fi
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

# Helm v4: pinned, from the Go module proxy (helm.sh/helm/v4).
HELM_VERSION="v4.3.2"
if ! "$gobin/helm" version --template '{{.Version}}' 2>/dev/null | grep -qx "${HELM_VERSION}"; then
  go install -ldflags "-X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}"
fi
"$gobin/helm" version --template 'helm {{.Version}} ({{.GoVersion}})' && echo

promtool --version 2>&1 | head -n 1
prometheus --version 2>&1 | head -n 1
/usr/bin/python3 -c 'import prometheus_client.parser; print("python3: prometheus_client parser available")'
kubectl version --client 2>/dev/null | head -n 2 || true
{ chromium --version || chromium-browser --version; } 2>/dev/null | head -n 1
