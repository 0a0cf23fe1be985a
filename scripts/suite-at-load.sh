#!/usr/bin/env bash
# Runs the whole suite (the README's test command, uncached) several times
# in a row, optionally beside busy loops that load the machine, and stops at
# the first failing run. Each run's output goes to <dir>/run-<i>.log.
#
#   scripts/suite-at-load.sh [-l loops] [-n nice] [-r runs] [-o dir]
#
#   -l  busy loops beside the suite (default 30; 0 for a quiet run)
#   -n  their nice level (default 10: the load average reads about 30 on
#       2 cores while go test still gets its share; at 0 a test process gets
#       a few percent of a core and packages pass go test's 10 min default)
#   -r  runs in a row (default 10)
#   -o  where the logs go (default a new temporary directory)
set -euo pipefail

loops=30 nice=10 runs=10 out=""
while getopts "l:n:r:o:" opt; do
	case "$opt" in
	l) loops="$OPTARG" ;;
	n) nice="$OPTARG" ;;
	r) runs="$OPTARG" ;;
	o) out="$OPTARG" ;;
	*) sed -n '2,14p' "$0"; exit 2 ;;
	esac
done
out="${out:-$(mktemp -d)}"
mkdir -p "$out"
cd "$(dirname "$0")/.."

pids=()
stop_loops() { [ "${#pids[@]}" -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop_loops EXIT
for _ in $(seq 1 "$loops"); do
	nice -n "$nice" bash -c 'while :; do :; done' &
	pids+=("$!")
done

for i in $(seq 1 "$runs"); do
	start=$SECONDS
	rc=0
	go test -race -timeout 30m -count=1 -v ./... >"$out/run-$i.log" 2>&1 || rc=$?
	printf 'run %d of %d: exit %d in %ds, load average %s; log %s\n' \
		"$i" "$runs" "$rc" "$((SECONDS - start))" "$(cut -d' ' -f1-3 /proc/loadavg)" "$out/run-$i.log"
	grep -h 'not judged on this machine' "$out/run-$i.log" | sed 's/^ */    /' || true
	if [ "$rc" -ne 0 ]; then
		grep -E '^(--- FAIL|FAIL|panic:)' "$out/run-$i.log" || true
		exit "$rc"
	fi
done
echo "$runs runs in a row passed with $loops busy loops at nice $nice"
