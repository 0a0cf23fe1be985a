#!/usr/bin/env bash
# Runs the bursty simulator's table (TestSimulatorBursty) over the seeds and
# loads docs/diagnosis-measured.md reports, one process a run, and keeps each run's
# rows for scripts/diagnosis-sweep.py to tabulate.
#
#   scripts/diagnosis-sweep.sh [-j JOBS] [-s SETS] TEST_BINARY OUTDIR
#
#   TEST_BINARY  go test -c -o x.test ./diagnosis
#   OUTDIR       one file a run: OUTDIR/SET/seedN.txt; OUTDIR/done when all ran
#   -j           runs at once (default: the machine's CPUs)
#   -s           the sets, comma separated (default all): default (seeds
#                1-24 at the scenarios' own rates), loads (50, 65, 80, 90
#                and 95 % of capacity, seeds 1-12; 65 and 90 % seeds
#                13-24 too), selfexc (the
#                self-exciting arrivals at their own rate and at those
#                loads, seeds 1-12)
#
# About 10 minutes for every set on 2 idle cores.
set -euo pipefail

jobs=$(nproc)
sets=default,loads,selfexc
while getopts j:s: o; do
	case $o in
	j) jobs=$OPTARG ;;
	s) sets=$OPTARG ;;
	*) echo "usage: $0 [-j JOBS] [-s SETS] TEST_BINARY OUTDIR" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 2 ]; then
	echo "usage: $0 [-j JOBS] [-s SETS] TEST_BINARY OUTDIR" >&2
	exit 2
fi
bin=$(realpath "$1")
out=$(realpath -m "$2")
[ -x "$bin" ] || { echo "$bin: not an executable test binary; build one with go test -c -o x.test ./diagnosis" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out/done"

loads="50 65 80 90 95"
# one line a run: SET TRAFFIC LOAD SEED
runs() {
	case ",$sets," in *,default,*) for s in $(seq 1 24); do echo "default - 0 $s"; done ;; esac
	case ",$sets," in *,loads,*)
		for l in $loads; do for s in $(seq 1 12); do echo "load-$l - $l $s"; done; done
		for l in 65 90; do for s in $(seq 13 24); do echo "load-$l - $l $s"; done; done ;;
	esac
	case ",$sets," in *,selfexc,*)
		for s in $(seq 1 12); do echo "self-own selfexciting 0 $s"; done
		for l in $loads; do for s in $(seq 1 12); do echo "self-$l selfexciting $l $s"; done; done ;;
	esac
}

# the binary reads its testdata relative to the package's directory
cd "$(dirname "$0")/../diagnosis"
export bin out
runs | xargs -P "$jobs" -L 1 sh -c '
	set=$0 traffic=$1 load=$2 seed=$3
	mkdir -p "$out/$set"
	[ "$traffic" = - ] && traffic=
	[ "$load" = 0 ] && load=
	DIAGNOSIS_TRAFFIC=$traffic DIAGNOSIS_LOAD=$load DIAGNOSIS_SEED=$seed DIAGNOSIS_TABLE=1 \
		"$bin" -test.run "TestSimulatorBursty\$" > "$out/$set/seed$seed.txt" 2>&1 || true'
touch "$out/done"
