#!/usr/bin/env bash
# Regenerates docs/diagnosis.png, the screenshot of /diagnosis in the README:
# runs the sidecar on a demo scenario with short windows, waits until the
# diagnosis names the scenario's cause, and has headless Chromium take the
# picture.
#
#   scripts/diagnosis-screenshot.sh [SCENARIO] [OUT]
#
# SCENARIO defaults to queueing, OUT to docs/diagnosis.png. Needs Go, curl
# and Chromium (Debian: apt-get install chromium). Takes about 40 s: the
# baseline (five recent windows of 6 s) builds up, then the shift comes.
# PORT (default 19413) is the loopback port the sidecar listens on.
set -euo pipefail

scenario=${1:-queueing}
root=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$root/docs/diagnosis.png}
port=${PORT:-19413}
chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ]; then
	echo "diagnosis-screenshot: chromium not found (Debian: apt-get install chromium)" >&2
	exit 1
fi
work=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

(cd "$root" && go build -o "$work/vllm-normalizer" ./cmd/vllm-normalizer)
"$work/vllm-normalizer" --web.listen-address="127.0.0.1:$port" \
	--demo --demo.engines=8 --demo.scenario="$scenario" --demo.shift-after=40s \
	--vllm.scrape-interval=250ms --derive.window=6s \
	--diagnosis.window=6s --diagnosis.baseline=30s >"$work/log" 2>&1 &
pid=$!

url="http://127.0.0.1:$port"
for _ in $(seq 1 240); do
	if curl -fsS "$url/api/v1/diagnosis" 2>/dev/null | tr -d '\n' | grep -q "\"name\": \"$scenario\",[[:space:]]*\"active\": true"; then
		found=1
		break
	fi
	sleep 0.5
done
if [ -z "${found:-}" ]; then
	echo "diagnosis-screenshot: $scenario was not named within two minutes; sidecar log:" >&2
	cat "$work/log" >&2
	exit 1
fi
# Let the recent window fill with the shifted load, so the charts show it.
sleep 4
"$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync \
	--user-data-dir="$work/profile" --hide-scrollbars --window-size=1280,1800 \
	--screenshot="$out" "$url/diagnosis" 2>/dev/null
echo "wrote $out ($scenario)"
