#!/usr/bin/env bash
# Where the whole process's CPU goes, the floor's and the sidecar's, side by
# side on one upstream: Linux perf samples every thread of each process
# (kernel time, the runtime's own threads and the GC included, which a Go
# CPU profile of one benchmark does not see) and each sample is put in one
# bucket by the functions on its stack.
#
#   scripts/wholeprofile.sh [-d SECONDS] [-p READ_EVERY] [-f HZ] [PAGE@INTERVAL]
#
#   -d  seconds sampled (default 90), after 12 s of scraping
#   -p  seconds between gzip reads of each process's /metrics, as
#       Prometheus scrapes (default 15; 0: nobody reads)
#   -f  samples per second (default 5000)
#
# PAGE is a file served as is or demo:N, as for sidebyside.sh; default
# demo:1@1s, the single-engine page at 1 s. Sampling makes both processes
# dearer, the sidecar more: read the shares, and take CPU per scrape from
# sidebyside.sh. Linux only; needs Go, curl, python3 (for a free port),
# perf (Debian: linux-perf) and the right to sample the processes (root,
# or kernel.perf_event_paranoid <= 1).
set -euo pipefail

dur=90 read_every=15 hz=5000
while getopts "d:p:f:" opt; do
	case $opt in
	d) dur=$OPTARG ;;
	p) read_every=$OPTARG ;;
	f) hz=$OPTARG ;;
	*) sed -n '2,20p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
config=${1:-demo:1@1s}
page=${config%@*} interval=${config##*@}
command -v perf >/dev/null || { echo "perf not found: install linux-perf" >&2; exit 1; }

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT

(cd "$root" && CGO_ENABLED=0 go build -o "$work/sidecar" ./cmd/vllm-normalizer &&
	CGO_ENABLED=0 go build -o "$work/floor" ./scripts/floor &&
	go build -o "$work/staticupstream" ./scripts/staticupstream)

wait_file() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

case "$page" in
demo:*) args=(-demo-engines "${page#demo:}" -demo-refresh 1s) ;;
*) args=(-page "$page") ;;
esac
"$work/staticupstream" "${args[@]}" -addr-file "$work/upstream.addr" 2>/dev/null &
pids+=($!)
wait_file "$work/upstream.addr"
upstream=$(cat "$work/upstream.addr")
"$work/floor" -url "http://$upstream/metrics?who=floor" -interval "$interval" -addr-file "$work/floor.addr" 2>/dev/null &
pids+=($!) floor=$!
wait_file "$work/floor.addr"
port=$(free_port)
"$work/sidecar" --vllm.scrape-uri="http://$upstream/metrics?who=sidecar" --vllm.scrape-interval="$interval" \
	--web.listen-address="127.0.0.1:$port" --log.level=error &
pids+=($!) sidecar=$!
if [ "$read_every" != 0 ]; then
	(while sleep "$read_every"; do
		curl -s -H 'Accept-Encoding: gzip' -o /dev/null "http://$(cat "$work/floor.addr")/metrics" || true
		curl -s -H 'Accept-Encoding: gzip' -o /dev/null "http://127.0.0.1:$port/metrics" || true
	done) &
	pids+=($!)
fi
sleep 12
perf record -q -F "$hz" -e cpu-clock -g -o "$work/floor.data" -p "$floor" -- sleep "$dur" 2>/dev/null &
rec=$!
perf record -q -F "$hz" -e cpu-clock -g -o "$work/sidecar.data" -p "$sidecar" -- sleep "$dur" 2>/dev/null
wait "$rec"

# One bucket per sample, the first rule its stack matches. perf script
# prints a header line per sample, then its frames, innermost first.
classify() {
	awk -v hz="$hz" -v scrapes="$scrapes" '
	function flush() {
		if (!n) return
		c = "other"
		if (s ~ / runtime\.sysmon/) c = "Go runtime monitor (sysmon)"
		else if (s ~ /gcBgMarkWorker|bgsweep|bgscavenge/) c = "GC workers"
		else if (s ~ /persistConn\)\.(readLoop|writeLoop)/) c = "HTTP client: request write, response read"
		else if (s ~ /http\.\(\*conn\)\.serve/) c = "serving its /metrics"
		else if (s ~ /scrape\.\(\*Fetcher\)\.Fetch|net\/http\.\(\*Client\)|io\.ReadAll/) c = "fetch, scrape loop side"
		else if (s ~ /exposition\.Parse|textparse/) c = "parse (floor: textparse with labels; sidecar: textparse, memo, checks)"
		else if (s ~ /vllm-normalizer\/mapping\./) c = "normalise, present"
		else if (s ~ /vllm-normalizer\/(window|derive)\./) c = "windows, derivations"
		else if (s ~ /vllm-normalizer\/routing\./) c = "routing view"
		else if (s ~ /vllm-normalizer\/(collector|diagnosis)\./) c = "publish, own metrics, diagnosis"
		else if (s ~ / main\./) c = "rest of the scrape loop"
		else if (s ~ /runtime\.(mcall|park_m|schedule|findRunnable)|futex|epoll/) c = "scheduler, wake-ups, netpoll"
		tot++; cnt[c]++; n = 0; s = ""
	}
	/^$/ { flush(); next }
	/^[^ \t]/ { flush(); n = 1; next }
	{ s = s " " $2 }
	END {
		flush()
		for (k in cnt) printf "  %5.1f %%  %s\n", 100 * cnt[k] / tot, k | "sort -rn"
		close("sort -rn")
		printf "  %d samples, %.2f ms a scrape under perf\n", tot, tot * 1000 / hz / scrapes
	}'
}
case "$interval" in
*ms) secs=$(awk -v v="${interval%ms}" 'BEGIN { print v / 1000 }') ;;
*s) secs=${interval%s} ;;
*) echo "interval $interval: give it as 100ms or 1s" >&2; exit 2 ;;
esac
scrapes=$(awk -v d="$dur" -v s="$secs" 'BEGIN { print d / s }')
for p in floor sidecar; do
	echo "$p, $page at $interval, $dur s:"
	perf script -i "$work/$p.data" 2>/dev/null | classify
done
