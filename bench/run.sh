#!/usr/bin/env bash
# make bench: the project's benchmarks that print figures against a peer or a
# budget, each measured in this run.
#
#   1. bench/overhead.sh: the traffic driver's own share of the TTFT and
#      latency it reports, against a paced streaming server in another
#      process, joined per request: p50/p99/max at 1, 16, 64 and 256 in
#      flight (the bound the report states beside its latency tables).
#   2. bench/driver-vs-peer.sh at 64 and at 256 in flight: the traffic driver
#      against hey v0.1.5 on the same loopback server (driver/peer
#      throughput ratio, goal >= 1.0; the driver's peak RSS, limit 200 MB).
#   3. BenchmarkRouterThroughput in ./clusters/sim: non-streaming chat through
#      the sim's vllm-router, sgl-model-gateway and llm-d-router (envoy + epp,
#      vLLM engines), 64 clients (req/s, memory).
#
# Knobs: those of bench/overhead.sh (BENCH_OVERHEAD_*), of
# bench/driver-vs-peer.sh (BENCH_REQUESTS, BENCH_ROUNDS, BENCH_PEER,
# BENCH_STRICT; BENCH_PEER_CONCURRENCY lists its levels, default "64 256"),
# and BENCH_SIM_BENCHTIME (default 20000x). Every part runs; the exit status
# is non-zero if any failed. On another machine without Go, parts 1 and 2
# run from make bench-dist's bundle (bench/overhead.sh, bench/driver-vs-peer.sh).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
work="$(mktemp -d "${TMPDIR:-/tmp}/bench-run.XXXXXX")"
trap 'rm -rf "$work"' EXIT

benchtime="${BENCH_SIM_BENCHTIME:-20000x}"
failed=()

echo "== 1/3 the traffic driver's overhead (bench/overhead.sh) =="
if bash bench/overhead.sh | tee "$work/overhead.out"; then
	:
else
	failed+=("bench/overhead.sh")
fi
echo

for c in ${BENCH_PEER_CONCURRENCY:-64 256}; do
	echo "== 2/3 traffic driver vs peer load generator at $c in flight (bench/driver-vs-peer.sh) =="
	if BENCH_CONCURRENCY="$c" bash bench/driver-vs-peer.sh | tee "$work/driver-vs-peer.$c.out"; then
		:
	else
		failed+=("bench/driver-vs-peer.sh (c=$c)")
	fi
	echo
done

echo "== 3/3 sim router throughput (go test -run '^\$' -bench RouterThroughput -benchtime $benchtime ./clusters/sim) =="
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
sed -n '/^driver overhead:/,/^ *[0-9]/p;/^ *[0-9][0-9]* *[0-9]/p' "$work/overhead.out" | awk '!seen[$0]++' || true
for f in "$work"/driver-vs-peer.*.out; do
	[[ -f "$f" ]] || continue
	c="${f##*driver-vs-peer.}"
	c="${c%.out}"
	grep -E '^(driver/peer throughput ratio|driver throughput|peer throughput|driver peak RSS):' "$f" | sed "s/^/c=$c: /" || true
done
sim_figures "$work/sim.out"
if ((${#failed[@]} > 0)); then
	echo "failed: ${failed[*]}" >&2
	exit 1
fi
