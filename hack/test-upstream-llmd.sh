#!/usr/bin/env bash
# The llm-d differential (make test-upstream-llmd): every llm-d claim × pair
# on the sim, once on the emulated endpoint picker and once on llm-d-router
# v0.10.0's built EPP, compared row by row (hack/eppdiff, internal/eppdiff).
#
#   hack/test-upstream-llmd.sh                 build the EPP if needed (make upstream-llmd), run, compare
#   hack/test-upstream-llmd.sh --if-available  the same, but where neither way of building the EPP
#                                              is available here, say so in one line and exit 0
#                                              (make test and .ci/run: this workplace's CI cannot
#                                              download llm-d's sources; docs/upstream-llmd.md)
#
# Environment: ARTIFACTS (default artifacts; the runs go to $ARTIFACTS/upstream-llmd),
# E2E_LLMD_DIR, LLMD_ROUTER_SRC, LLMD_KV_CACHE_SRC, GINKGO_NODES (default 2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
go=${GO:-go}
optional=false
[ "${1:-}" = "--if-available" ] && optional=true
say() { echo "test-upstream-llmd: $*"; }

# A build already made (make upstream-llmd, or E2E_LLMD_DIR naming one) is
# used as it is; the run checks its manifest. Else build it now.
rc=0
why=
if [ ! -f "${E2E_LLMD_DIR:-$root/.upstream-llmd}/manifest.json" ]; then
  why=$(bash hack/upstream-llmd.sh 2>&1 >/dev/null) || rc=$?
fi
if [ "$rc" -eq 3 ] && $optional; then
  say "not run: no build of llm-d's EPP and no way to make one here (${why#upstream-llmd: })"
  exit 0
fi
if [ "$rc" -ne 0 ]; then
  echo "$why" >&2
  exit 1
fi

out=${ARTIFACTS:-$root/artifacts}/upstream-llmd
rm -rf "$out"
mkdir -p "$out"
"$go" build -o bin/e2e ./cmd/e2e
for mode in emulated upstream; do
  say "the llm-d claims on the $mode EPP (log: ${out#"$root"/}/$mode.log)"
  started=$(date +%s)
  # A failed spec does not stop the comparison: the differential is about
  # whether both EPPs give the same result, failing or not.
  E2E_TARGET=sim E2E_ROUTERS=llm-d-router E2E_SIM_LLMD=$mode \
    bin/e2e run -go="$go" -target=sim -artifacts="$out/$mode" -nodes="${GINKGO_NODES:-2}" >"$out/$mode.log" 2>&1 || true
  [ -f "$out/$mode/report.json" ] || { tail -n 30 "$out/$mode.log" >&2; echo "test-upstream-llmd: the $mode run wrote no report (log above)" >&2; exit 1; }
  say "$(grep -m1 '^Routing conformance' "$out/$mode.log" || echo 'no summary line') in $(($(date +%s) - started)) s"
done
"$go" run ./hack/eppdiff -emulated "$out/emulated/report.json" -upstream "$out/upstream/report.json" -out "$out/differential.md"
say "comparison: ${out#"$root"/}/differential.md"
