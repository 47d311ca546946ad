#!/usr/bin/env bash
# Runs every Go fuzz target in the repository for a short time each.
# Usage: hack/fuzz.sh [duration per target, default 10s]
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-10s}
found=0
while IFS=: read -r file name; do
  pkg=./$(dirname "$file")
  echo "== $pkg $name ($fuzztime)"
  go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" -fuzzminimizetime 2s "$pkg"
  found=$((found + 1))
done < <(git ls-files "*_test.go" | xargs grep -o -H "^func Fuzz[A-Za-z0-9_]*" | sed "s/func //")
if [ "$found" -eq 0 ]; then echo "hack/fuzz.sh: no fuzz targets found" >&2; exit 1; fi
echo "fuzzed $found targets"
