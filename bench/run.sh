#!/usr/bin/env bash
# make bench: the project's benchmarks that print figures against a peer or a
# budget, each measured in this run.
#
#   1. bench/driver-vs-peer.sh: the traffic driver against hey v0.1.5 on the
#      same loopback server (driver/peer throughput ratio, goal >= 1.0; the
#      driver's peak RSS, limit 200 MB).
#   2. BenchmarkRouterThroughput in ./clusters/sim: non-streaming chat through
#      the sim's vllm-router, sgl-model-gateway and llm-d-router (envoy + epp,
#      vLLM engines), 64 clients (req/s, memory).
#
# Knobs: those of bench/driver-vs-peer.sh (BENCH_REQUESTS, BENCH_CONCURRENCY,
# BENCH_ROUNDS, BENCH_PEER, BENCH_STRICT) and BENCH_SIM_BENCHTIME (default
# 20000x). Both parts always run; the exit status is non-zero if either failed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d "${TMPDIR:-/tmp}/bench-run.XXXXXX")"
trap 'rm -rf "$work"' EXIT

benchtime="${BENCH_SIM_BENCHTIME:-20000x}"
failed=()

echo "== 1/2 traffic driver vs peer load generator (bench/driver-vs-peer.sh) =="
if bash bench/driver-vs-peer.sh | tee "$work/driver-vs-peer.out"; then
	:
else
	failed+=("bench/driver-vs-peer.sh")
fi
echo

echo "== 2/2 sim router throughput (go test -run '^\$' -bench RouterThroughput -benchtime $benchtime ./clusters/sim) =="
if go test -run '^$' -bench RouterThroughput -benchtime "$benchtime" ./clusters/sim | tee "$work/sim.out"; then
	:
else
	failed+=("BenchmarkRouterThroughput")
fi
echo

# Benchmark lines read "<name>-<procs> <N> <v> ns/op <v> <unit> ..."; print
# each router's figures by unit.
sim_figures() {
	awk '/^BenchmarkRouterThroughput\// {
		name = $1
		sub(/^BenchmarkRouterThroughput\//, "", name)
		sub(/-[0-9]+$/, "", name)
		delete f
		for (i = 3; i < NF; i += 2) f[$(i + 1)] = $i
		printf "sim router throughput (%s): %s req/s, peak RSS %s MB, heap in use %s MB (%s requests, 64 clients)\n", \
			name, f["req/s"], f["MB-peak-rss"], f["MB-heap"], $2
	}' "$1"
}

echo "== summary =="
grep -E '^(driver/peer throughput ratio|driver throughput|peer throughput|driver peak RSS):' "$work/driver-vs-peer.out" || true
sim_figures "$work/sim.out"
if ((${#failed[@]} > 0)); then
	echo "failed: ${failed[*]}" >&2
	exit 1
fi
