#!/usr/bin/env bash
# The traffic driver's own share of the TTFT and latency it reports: a paced
# streaming server in another process (10 ms to the first token, then 8 more
# chunks 2 ms apart) records its own timing of every request; the driver's
# figure for the same request (joined by a request header) minus the
# server's is the driver's overhead. Prints p50/p99/max per concurrency level
# (the median of the rounds), and the driver's throughput per level.
#
#   bench/overhead.sh                                  # levels 1,16,64,256, 3 rounds
#   BENCH_OVERHEAD_LEVELS=64 BENCH_OVERHEAD_ROUNDS=5 bench/overhead.sh
#   tar xzf bench.tar.gz && bench/overhead.sh          # prebuilt binaries from make bench-dist: no Go needed
#
# Knobs: BENCH_OVERHEAD_LEVELS, BENCH_OVERHEAD_ROUNDS, BENCH_OVERHEAD_REQUESTS
# (per level; default max(400, 32 x concurrency)), BENCH_OVERHEAD_MODE
# (stream, or alternate as the concurrency claim sends), BENCH_OVERHEAD_JSON
# (write every round as JSON there), BENCH_BIN.
set -euo pipefail

levels="${BENCH_OVERHEAD_LEVELS:-1,16,64,256}"
rounds="${BENCH_OVERHEAD_ROUNDS:-3}"
requests="${BENCH_OVERHEAD_REQUESTS:-0}"
mode="${BENCH_OVERHEAD_MODE:-stream}"
json="${BENCH_OVERHEAD_JSON:-}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${BENCH_BIN:-}"
if [[ -z "$bin" && -x "$here/overheadbench" && -x "$here/pacedserver" ]]; then
	bin="$here" # unpacked from make bench-dist
fi
if [[ -z "$bin" ]]; then
	bin="$(mktemp -d "${TMPDIR:-/tmp}/overhead-bin.XXXXXX")"
	trap 'rm -rf "$bin"' EXIT
	(cd "$here/.." && go build -o "$bin/" ./bench/cmd/pacedserver ./bench/cmd/overheadbench)
fi
for b in pacedserver overheadbench; do
	[[ -x "$bin/$b" ]] || { echo "overhead: $bin/$b is missing (make bench-bin builds it)" >&2; exit 2; }
done

args=(-server "$bin/pacedserver" -levels "$levels" -rounds "$rounds" -requests "$requests" -mode "$mode")
[[ -n "$json" ]] && args+=(-json "$json")
echo "overhead: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) before the run" >&2
"$bin/overheadbench" "${args[@]}"
