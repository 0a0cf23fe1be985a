#!/usr/bin/env bash
# Installs the tools the deploy/ and dashboards/ tests need, on a fresh Debian
# machine (as root). Idempotent: tools already present are left alone.
#
#   promtool  - `promtool check rules` / `promtool test rules`
#               (Debian package "prometheus", which ships promtool)
#   kubectl   - `kubectl kustomize deploy/kubernetes` (needs embedded kustomize
#               v4 or v5, i.e. kubectl >= 1.21; the Go machine image ships one).
#               Debian 12's "kubernetes-client" is 1.20 with kustomize v2,
#               too old: the test then skips with a message instead of failing.
#
# Without these tools the corresponding Go tests skip with a message.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v kubectl  >/dev/null 2>&1 || need_apt+=(kubernetes-client)

if [ "${#need_apt[@]}" -gt 0 ]; then
  $SUDO apt-get update
  # Only promtool is used; the prometheus server the package also ships is not.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${need_apt[@]}"
fi

promtool --version 2>&1 | head -n 1
kubectl version --client 2>/dev/null | head -n 2 || true
