#!/bin/sh
# Runs every fuzz target of the module for a while each.
#   scripts/fuzz.sh [seconds]     (default 10 per target)
# A failing input is written under <package>/testdata/fuzz/<Target>/; commit
# it with the fix as a regression seed (plain `go test` then replays it).
set -eu
secs="${1:-10}"
cd "$(dirname "$0")/.."
# Package directories holding a Fuzz target, then each target's name.
for dir in $(grep -l '^func Fuzz' --include='*_test.go' -r . | xargs -n1 dirname | sort -u); do
	for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$dir"/*_test.go); do
		echo "== $dir $target (${secs}s)"
		go test -run='^$' -fuzz="^${target}\$" -fuzztime="${secs}s" -fuzzminimizetime=30x "$dir"
	done
done
