#!/usr/bin/env bash
# Whole-process cost of the sidecar against the floor (scripts/floor: fetch,
# textparse with labels, serve the raw bytes), both scraping the same
# loopback upstream at the same time, so that whatever else loads the
# machine loads both alike.
#
#   scripts/sidebyside.sh [-r ROUNDS] [-w WARM] [-d SECONDS] [-s LABEL=REV]... [-v] [PAGE@INTERVAL]...
#
#   -r  rounds (default 3); each round runs every PAGE@INTERVAL once, in
#       order, so that the rounds interleave and a burst of load elsewhere
#       hits one run of each, not every run of one
#   -w  seconds of scraping before measuring starts (default 10)
#   -d  seconds measured (default 60)
#   -s  also run the sidecar as built at git revision REV, under LABEL
#       (repeatable; e.g. -s before=main); the working tree's sidecar is
#       always run, as "sidecar"
#   -e  also run the working tree's sidecar with environment variables set,
#       under LABEL: -e LABEL=VAR=VALUE[,VAR=VALUE]... (repeatable; e.g.
#       -e gogo75=GOGC=75 -e lim=GOMEMLIMIT=12MiB), to weigh the runtime's
#       settings against the default side by side
#   -p  seconds between reads of each process's /metrics, with gzip, as
#       Prometheus scrapes (default 15; 0: nobody reads). The floor serves
#       its raw bytes; the sidecar encodes its page for the first reader
#   -o  directory to keep the raw results in (default: a temporary one)
#   -F  run the floor with GOMAXPROCS=N (default: Go's own choice, the
#       machine's CPUs). The sidecars run as shipped: --runtime.gomaxprocs
#       defaults to 1, which a floor on 1 CPU matches
#   -z  ask the upstream for gzip: the floor with -gzip, the working
#       tree's sidecar with --vllm.enable-compression (by default both ask
#       for identity; sidecars built from a revision before that flag
#       always ask for gzip)
#   -v  every view is read after every scrape, with gzip: each sidecar's
#       /metrics/routing, /metrics/genai and, on a routing listener, the
#       compatibility page (the views are built by their first reader, so
#       this is their whole cost); the floor serves no such view. A third
#       process, "floorv", is the floor also serving the working tree's
#       sidecar's three views as gzip bytes saved once from it at the
#       start of each run (scripts/floor -views), read alike: what
#       serving the same bytes costs with nothing to build, encode or
#       compress
#   -O  also run the OpenTelemetry Collector doing the same renames
#       (scripts/otelcol: prometheus receiver, metrics_transform, prometheus
#       exporter), as "otel". Its build downloads about 2 GB of modules
#       and takes minutes; it is not part of CI
#
# PAGE is a file served as is, or demo:N, the demo upstream over N
# data-parallel engines (values moving, a new page each second). Default:
# every page of docs/performance.md at 100ms and 1s.
#
# For each run and process it prints whole-process CPU per scrape (time on
# CPU of all its threads over the measured seconds, from
# /proc/PID/task/*/schedstat, in nanoseconds: /proc/PID/stat counts 10 ms
# ticks, too coarse for a few hundred scrapes of a millisecond; divided by
# the scrapes the upstream answered that process), steady RSS (median of VmRSS
# sampled each second), its anonymous part (RssAnon: heap, stacks, runtime;
# the rest is the executable's pages, larger for a larger binary) and peak
# RSS (VmHWM), then the medians over rounds of each process's ratio to the
# floor measured in the same run, and with -O to the Collector's.
# Linux only; needs Go, git and curl.
set -euo pipefail

rounds=3 warm=10 dur=60 out="" read_every=15 floor_procs=""
revs=() envs=() floor_args=() sidecar_args=() otel="" views=""
while getopts "r:w:d:s:e:o:p:F:zvO" opt; do
	case $opt in
	r) rounds=$OPTARG ;;
	w) warm=$OPTARG ;;
	d) dur=$OPTARG ;;
	s) revs+=("$OPTARG") ;;
	e) envs+=("$OPTARG") ;;
	o) out=$OPTARG ;;
	p) read_every=$OPTARG ;;
	F) floor_procs=$OPTARG ;;
	z) floor_args=(-gzip) sidecar_args=(--vllm.enable-compression) ;;
	v) views=1 ;;
	O) otel=1 ;;
	*) sed -n '2,50p' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
root=$(cd "$(dirname "$0")/.." && pwd)
fixture03="$root/testdata/fixtures/03-vllm-composite-0.5.0+v1families-datadog-vllm-fixture.prom"
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then
	for p in "$fixture03" demo:1 demo:4 demo:16 demo:64; do
		for i in 100ms 1s; do configs+=("$p@$i"); done
	done
fi

work=$(mktemp -d)
[ -n "$out" ] || out="$work/results"
mkdir -p "$out"
pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

echo "building into $work ..." >&2
# Every program is built as the release is (Makefile, Dockerfile): static,
# without cgo, so that none of them maps a C library the others do not.
(cd "$root" && CGO_ENABLED=0 go build -o "$work/sidecar" ./cmd/vllm-normalizer &&
	CGO_ENABLED=0 go build -o "$work/floor" ./scripts/floor &&
	go build -o "$work/staticupstream" ./scripts/staticupstream)
procs=(floor sidecar)
[ -z "$views" ] || procs+=(floorv)
if [ -n "$otel" ]; then
	(cd "$root/scripts/otelcol" && CGO_ENABLED=0 go build -o "$work/otel" .)
	procs+=(otel)
	# One metrics_transform rename per catalogue family with a
	# replacement; a counter's _total is matched either way, as the
	# receiver may keep or drop it.
	awk '/^  - name:/ { n = $3 } /^    replacement:/ { print n, $2 }' "$root/mapping/catalogue.yaml" |
		while read -r old new; do
			printf '      - include: ^%s(_total)?$\n        match_type: regexp\n        action: update\n        new_name: %s$${1}\n' \
				"${old%_total}" "${new%_total}"
		done >"$work/otel-transforms.yaml"
	[ -s "$work/otel-transforms.yaml" ] || { echo "no replacement found in mapping/catalogue.yaml" >&2; exit 1; }
fi
for lr in "${revs[@]}"; do
	label=${lr%%=*} rev=${lr#*=}
	mkdir "$work/src-$label"
	git -C "$root" archive "$rev" | tar -x -C "$work/src-$label"
	(cd "$work/src-$label" && CGO_ENABLED=0 go build -o "$work/$label" ./cmd/vllm-normalizer)
	procs+=("$label")
done
declare -A env_of
for le in "${envs[@]}"; do
	label=${le%%=*}
	env_of[$label]=${le#*=}
	procs+=("$label")
done

# cpu_ns PID: nanoseconds on CPU of all the process's threads so far (a Go
# program does not end its threads, so none of its time is lost).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f\n", s }'; }
status_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
wait_file() { for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done; echo "timed out waiting for $1" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

results="$out/runs.tsv"
printf 'round\tpage\tinterval\tproc\tbytes\tscrapes\tcpu_ms_per_scrape\tsteady_rss_mib\tpeak_rss_mib\tsteady_anon_mib\n' >"$results"

run_one() { # round page interval
	local round=$1 page=$2 interval=$3 args upstream bytes name
	declare -A pid c0 n0 addr compat
	case "$page" in
	demo:*) args=(-demo-engines "${page#demo:}" -demo-refresh 1s) ;;
	*) args=(-page "$page") ;;
	esac
	rm -f "$work/upstream.addr" "$work/floor.addr"
	"$work/staticupstream" "${args[@]}" -addr-file "$work/upstream.addr" 2>/dev/null &
	pids+=($!)
	wait_file "$work/upstream.addr"
	upstream=$(cat "$work/upstream.addr")
	bytes=$(curl -s "http://$upstream/metrics" | wc -c)
	for name in "${procs[@]}"; do
		if [ "$name" = floorv ]; then
			continue # started below, from the sidecar's views
		elif [ "$name" = floor ]; then
			${floor_procs:+env GOMAXPROCS=$floor_procs} "$work/floor" "${floor_args[@]}" -url "http://$upstream/metrics?who=floor" -interval "$interval" -addr-file "$work/floor.addr" 2>/dev/null &
			pid[$name]=$!
			wait_file "$work/floor.addr"
			addr[$name]=$(cat "$work/floor.addr")
		elif [ "$name" = otel ]; then
			addr[$name]="127.0.0.1:$(free_port)"
			sed -e "s|@UPSTREAM@|$upstream|" -e "s|@INTERVAL@|$interval|" -e "s|@LISTEN@|${addr[$name]}|" \
				-e "/^@TRANSFORMS@$/{r $work/otel-transforms.yaml" -e "d}" \
				"$root/scripts/otelcol/config.yaml" >"$work/otel.yaml"
			"$work/otel" --config="$work/otel.yaml" 2>"$work/otel.log" &
			pid[$name]=$!
		else
			addr[$name]="127.0.0.1:$(free_port)"
			local extra=()
			[ "$name" = sidecar ] && extra=("${sidecar_args[@]}")
			if [ -n "$views" ]; then
				compat[$name]="127.0.0.1:$(free_port)"
				extra+=(--web.routing-listen-address="${compat[$name]}")
			fi
			local bin=$name setenv=()
			if [ -n "${env_of[$name]:-}" ]; then
				bin=sidecar
				IFS=, read -r -a setenv <<<"${env_of[$name]}"
			fi
			env ${setenv[@]+"${setenv[@]}"} "$work/$bin" "${extra[@]}" --vllm.scrape-uri="http://$upstream/metrics?who=$name" --vllm.scrape-interval="$interval" \
				--web.listen-address="${addr[$name]}" --log.level=error &
			pid[$name]=$!
		fi
		pids+=("${pid[$name]}")
	done
	if [ -n "$views" ]; then
		mkdir -p "$work/views"
		rm -f "$work/floorv.addr" "$work/floorv.views"
		for _ in $(seq 100); do curl -sf -o /dev/null "http://${addr[sidecar]}/metrics/routing" && break; sleep 0.1; done
		curl -sf -H 'Accept-Encoding: gzip' -o "$work/views/routing.gz" "http://${addr[sidecar]}/metrics/routing"
		curl -sf -H 'Accept-Encoding: gzip' -o "$work/views/genai.gz" "http://${addr[sidecar]}/metrics/genai"
		curl -sf -H 'Accept-Encoding: gzip' -o "$work/views/compat.gz" "http://${compat[sidecar]}/metrics"
		${floor_procs:+env GOMAXPROCS=$floor_procs} "$work/floor" "${floor_args[@]}" -url "http://$upstream/metrics?who=floorv" -interval "$interval" \
			-addr-file "$work/floorv.addr" -views "$work/views" -views-addr-file "$work/floorv.views" 2>/dev/null &
		pid[floorv]=$!
		pids+=($!)
		wait_file "$work/floorv.addr"
		wait_file "$work/floorv.views"
		addr[floorv]=$(cat "$work/floorv.addr") compat[floorv]=$(cat "$work/floorv.views")
	fi
	if [ "$read_every" != 0 ]; then
		(while sleep "$read_every"; do
			for name in "${procs[@]}"; do curl -s --compressed -o /dev/null "http://${addr[$name]}/metrics" || true; done
		done) &
		pids+=($!)
	fi
	if [ -n "$views" ]; then
		local every
		every=$(awk -v i="$interval" 'BEGIN { if (i ~ /ms$/) print substr(i, 1, length(i) - 2) / 1000; else print substr(i, 1, length(i) - 1) }')
		(while sleep "$every"; do
			for name in "${!compat[@]}"; do
				curl -s --compressed -o /dev/null -o /dev/null -o /dev/null \
					"http://${addr[$name]}/metrics/routing" "http://${addr[$name]}/metrics/genai" "http://${compat[$name]}/metrics" || true
			done
		done) &
		pids+=($!)
	fi
	sleep "$warm"
	for name in "${procs[@]}"; do
		c0[$name]=$(cpu_ns "${pid[$name]}")
		n0[$name]=$(curl -s "http://$upstream/count?who=$name")
		: >"$work/rss-$name"
		: >"$work/anon-$name"
	done
	for _ in $(seq "$dur"); do
		sleep 1
		for name in "${procs[@]}"; do
			status_kib "${pid[$name]}" VmRSS >>"$work/rss-$name"
			status_kib "${pid[$name]}" RssAnon >>"$work/anon-$name"
		done
	done
	for name in "${procs[@]}"; do
		local c1 n1 steady peak anon
		c1=$(cpu_ns "${pid[$name]}")
		n1=$(curl -s "http://$upstream/count?who=$name")
		steady=$(sort -n "$work/rss-$name" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
		anon=$(sort -n "$work/anon-$name" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
		peak=$(status_kib "${pid[$name]}" VmHWM)
		awk -v r="$round" -v p="$(basename "$page")" -v i="$interval" -v n="$name" -v b="$bytes" \
			-v c="$((c1 - c0[$name]))" -v s="$((n1 - n0[$name]))" -v st="$steady" -v pk="$peak" -v an="$anon" \
			'BEGIN { printf "%s\t%s\t%s\t%s\t%d\t%d\t%.3f\t%.1f\t%.1f\t%.1f\n", r, p, i, n, b, s, c / 1e6 / (s > 0 ? s : 1), st / 1024, pk / 1024, an / 1024 }' >>"$results"
	done
	stop_all
	tail -n "${#procs[@]}" "$results" >&2
}

for round in $(seq "$rounds"); do
	for cfg in "${configs[@]}"; do
		run_one "$round" "${cfg%@*}" "${cfg##*@}"
	done
done

# Medians over rounds, and the median of the per-run ratios to the floor
# (and, with -O, to the OpenTelemetry Collector).
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# run_ratio PAGE INTERVAL NAME BASE: the median over rounds of NAME's CPU
# per scrape over BASE's in the same run.
run_ratio() {
	join <(awk -F'\t' -v p="$1" -v i="$2" -v n="$4" '$2 == p && $3 == i && $4 == n { print $1, $7 }' "$results" | sort) \
		<(awk -F'\t' -v p="$1" -v i="$2" -v n="$3" '$2 == p && $3 == i && $4 == n { print $1, $7 }' "$results" | sort) |
		awk '$2 > 0 { print $3 / $2 }' | median
}
echo
printf '%-28s %-6s %-8s %8s %10s %8s %8s %10s %10s %10s\n' page interval proc KB "cpu ms" "/floor" "/otel" "steady MiB" "anon MiB" "peak MiB"
for cfg in "${configs[@]}"; do
	p=$(basename "${cfg%@*}") i=${cfg##*@}
	for name in "${procs[@]}"; do
		sel() { awk -F'\t' -v p="$p" -v i="$i" -v n="$1" -v col="$2" '$2 == p && $3 == i && $4 == n { print $col }' "$results"; }
		vs_otel=-
		[ -n "$otel" ] && vs_otel=$(printf '%.2fx' "$(run_ratio "$p" "$i" "$name" otel)")
		printf '%-28s %-6s %-8s %8.0f %10s %7.2fx %8s %10s %10s %10s\n' "${p:0:28}" "$i" "$name" "$(sel "$name" 5 | median | awk '{ print $1 / 1024 }')" \
			"$(sel "$name" 7 | median)" "$(run_ratio "$p" "$i" "$name" floor)" "$vs_otel" "$(sel "$name" 8 | median)" "$(sel "$name" 10 | median)" "$(sel "$name" 9 | median)"
	done
done
echo "raw results: $results (kept only with -o)" >&2
