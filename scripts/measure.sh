#!/usr/bin/env bash
# Whole-process cost of the sidecar, measured from outside with /proc.
#
#   scripts/measure.sh scrape [PAGE] [INTERVAL] [DURATION]
#       CPU seconds per scrape and peak RSS while scraping PAGE every
#       INTERVAL (default 100ms) for DURATION (default 60s).
#   scripts/measure.sh serve [PAGE] [READERS] [DURATION] [PATH] [gzip]
#       Requests/s of READERS (default 8) concurrent keep-alive readers of
#       PATH (default /metrics) for DURATION (default 20s), with the
#       sidecar scraping every 1s; also the sidecar's CPU per request.
#       A sixth argument "gzip" makes the readers ask for gzip.
#
# PAGE is a file, or demo:N for the demo upstream over N data-parallel
# engines (values moving), default demo:16 (~620 KB). The upstream is
# scripts/staticupstream on loopback; a file is served as is (gzip when
# asked, as vLLM does). Windows are the defaults (1m, 5m).
#
# Needs Go and curl; reads utime+stime from /proc/PID/stat and VmHWM from
# /proc/PID/status, so it runs on Linux only.
set -euo pipefail

mode=${1:-scrape}
page=${2:-demo:16}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

echo "building into $work ..." >&2
(cd "$root" && CGO_ENABLED=0 go build -o "$work/vllm-normalizer" ./cmd/vllm-normalizer &&
	go build -o "$work/staticupstream" ./scripts/staticupstream &&
	go build -o "$work/loadgen" ./scripts/loadgen)

tck=$(getconf CLK_TCK)
# cpu_seconds PID: user+system CPU seconds the process has used so far.
cpu_seconds() { awk -v t="$tck" '{ split($0, a, ") "); split(a[2], f, " "); printf "%.3f\n", (f[12] + f[13]) / t }' "/proc/$1/stat"; }
peak_rss_mib() { awk '/^VmHWM:/ { printf "%.1f\n", $2 / 1024 }' "/proc/$1/status"; }
wait_file() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }

start_upstream() {
	local args
	case "$page" in
	demo:*) args=(-demo-engines "${page#demo:}") ;;
	*) args=(-page "$page") ;;
	esac
	"$work/staticupstream" "${args[@]}" -addr-file "$work/upstream.addr" &
	pids+=($!)
	wait_file "$work/upstream.addr"
	upstream=$(cat "$work/upstream.addr")
	bytes=$(curl -s "http://$upstream/metrics" | wc -c)
	echo "upstream http://$upstream/metrics: $page, $bytes bytes" >&2
}

start_sidecar() { # interval
	local port
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 19400)
	sidecar="127.0.0.1:$port"
	"$work/vllm-normalizer" --vllm.scrape-uri="http://$upstream/metrics" --vllm.scrape-interval="$1" \
		--web.listen-address="$sidecar" --log.level=warn &
	sidecar_pid=$!
	pids+=("$sidecar_pid")
	for _ in $(seq 100); do curl -sf "http://$sidecar/metrics" >/dev/null && return 0; sleep 0.1; done
	echo "the sidecar did not come up" >&2
	exit 1
}

count() { curl -s "http://$upstream/count"; }

case "$mode" in
scrape)
	interval=${3:-100ms}
	duration=${4:-60}
	duration=${duration%s}
	start_upstream
	start_sidecar "$interval"
	sleep 2 # past start-up
	c0=$(cpu_seconds "$sidecar_pid")
	n0=$(count)
	sleep "$duration"
	c1=$(cpu_seconds "$sidecar_pid")
	n1=$(count)
	up=$(curl -s "http://$sidecar/metrics" | awk '$1 == "vllm_up" { print $2 }')
	awk -v c0="$c0" -v c1="$c1" -v n0="$n0" -v n1="$n1" -v rss="$(peak_rss_mib "$sidecar_pid")" \
		-v page="$page" -v b="$bytes" -v i="$interval" -v d="$duration" -v up="$up" 'BEGIN {
		n = n1 - n0
		printf "page=%s bytes=%d interval=%s duration=%ss scrapes=%d vllm_up=%s\n", page, b, i, d, n, up
		printf "cpu_seconds=%.2f cpu_ms_per_scrape=%.2f cpu_share_of_one_core=%.1f%% peak_rss_mib=%s\n",
			c1 - c0, 1000 * (c1 - c0) / (n > 0 ? n : 1), 100 * (c1 - c0) / d, rss
	}'
	;;
serve)
	readers=${3:-8}
	duration=${4:-20}
	duration=${duration%s}
	path=${5:-/metrics}
	gz=()
	[ "${6:-}" = gzip ] && gz=(-gzip)
	start_upstream
	start_sidecar 1s
	sleep 2
	c0=$(cpu_seconds "$sidecar_pid")
	out=$("$work/loadgen" -url "http://$sidecar$path" -c "$readers" -d "${duration}s" "${gz[@]}")
	c1=$(cpu_seconds "$sidecar_pid")
	echo "page=$page path=$path readers=$readers gzip=${6:-no} peak_rss_mib=$(peak_rss_mib "$sidecar_pid")"
	echo "$out"
	reqs=$(sed -n 's/.*requests=\([0-9]*\).*/\1/p' <<<"$out")
	awk -v c="$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')" -v n="$reqs" \
		'BEGIN { printf "sidecar_cpu_seconds=%.2f sidecar_cpu_us_per_request=%.1f (includes its own scrapes)\n", c, 1e6 * c / (n > 0 ? n : 1) }'
	;;
*)
	sed -n '2,20p' "$0" >&2
	exit 2
	;;
esac
