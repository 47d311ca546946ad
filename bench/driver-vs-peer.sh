#!/usr/bin/env bash
# Compares the traffic driver's throughput with a peer load generator (hey
# v0.1.5; vegeta v12.13.0 if hey cannot be installed) against the same
# loopback OpenAI server, the same JSON body, the same concurrency and the
# same request count, and reports the driver's memory.
#
#   bench/driver-vs-peer.sh                      # 20000 requests, concurrency 64, 3 rounds
#   BENCH_REQUESTS=5000 BENCH_ROUNDS=1 bench/driver-vs-peer.sh
#
# Knobs: BENCH_REQUESTS, BENCH_CONCURRENCY, BENCH_ROUNDS (median reported),
# BENCH_PEER=vegeta (skip hey, e.g. to check the fallback),
# BENCH_STRICT=1 (exit 1 when the ratio is below 1.0 or the driver's peak RSS
# is 200 MB or more), BENCH_BIN (a folder with prebuilt loopback-openai,
# driverbench and hey, as make bench-dist packs them beside this script: no
# Go needed; the default when they are there). Rounds alternate which tool
# goes first.
set -euo pipefail

requests="${BENCH_REQUESTS:-20000}"
concurrency="${BENCH_CONCURRENCY:-64}"
rounds="${BENCH_ROUNDS:-3}"
strict="${BENCH_STRICT:-0}"
rss_limit_mb=200
# hey sends floor(n/c) requests per worker: use a multiple of c for both tools.
requests=$((requests / concurrency * concurrency))
((requests > 0)) || { echo "driver-vs-peer: BENCH_REQUESTS must be >= BENCH_CONCURRENCY" >&2; exit 2; }

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/driver-vs-peer.XXXXXX")"
server_pid=""

cleanup() {
	if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

log() { printf '%s\n' "$*" >&2; }

# --- tools ---------------------------------------------------------------
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${BENCH_BIN:-}" && -x "$here/driverbench" && -x "$here/loopback-openai" && -x "$here/hey" ]]; then
	BENCH_BIN="$here"
fi
peer=""
if [[ -n "${BENCH_BIN:-}" ]]; then
	GOBIN="$BENCH_BIN"
	for b in loopback-openai driverbench hey; do
		[[ -x "$GOBIN/$b" ]] || { log "driver-vs-peer: $GOBIN/$b is missing (make bench-dist packs it)"; exit 2; }
	done
	peer="hey v0.1.5"
else
	export GOBIN="$work/bin"
	mkdir -p "$GOBIN"
	if [[ "${BENCH_PEER:-auto}" != vegeta ]] && (cd "$work" && go install github.com/rakyll/hey@v0.1.5) >"$work/install.log" 2>&1; then
		peer="hey v0.1.5"
	elif (cd "$work" && go install github.com/tsenart/vegeta/v12@v12.13.0) >>"$work/install.log" 2>&1; then
		peer="vegeta v12.13.0"
	else
		log "driver-vs-peer: could not install hey@v0.1.5 or vegeta@v12.13.0:"
		cat "$work/install.log" >&2
		exit 1
	fi
	(cd "$root" && go build -o "$GOBIN/loopback-openai" ./bench/cmd/loopback-openai &&
		go build -o "$GOBIN/driverbench" ./bench/cmd/driverbench)
fi
log "driver-vs-peer: peer is $peer"

# --- server --------------------------------------------------------------
"$GOBIN/loopback-openai" -addr 127.0.0.1:0 -addr-file "$work/addr" -capture-body "$work/body.json" \
	2>"$work/server.log" &
server_pid=$!
for _ in $(seq 1 100); do
	[[ -s "$work/addr" ]] && break
	kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
	sleep 0.1
done
[[ -s "$work/addr" ]] || { log "driver-vs-peer: server did not start within 10s"; exit 1; }
base="http://$(cat "$work/addr")/v1"
url="$base/chat/completions"

# --- one measurement each --------------------------------------------------
kv() { sed -n "s/^$1=//p" "$2" | tail -1; }

# timed FILE CMD...: runs CMD, writing its user+system CPU seconds to FILE.
# CPU per request is steadier than throughput on a shared machine.
timed() {
	local file="$1" rc=0
	shift
	local TIMEFORMAT='%3U %3S'
	{ time "$@" 2>&3; } 3>&2 2>"$file" || rc=$?
	return "$rc"
}
cpu_us() { awk -v n="$requests" '{ printf "%.1f", ($1 + $2) * 1e6 / n }' "$1"; }

# run_driver ROUND / run_peer ROUND write "<req/s> ... <us CPU/request>" to
# $work/<tool>.ROUND.vals; they run in this shell so that exit stops the script.
run_driver() { # round
	local out="$work/driver.$1"
	if ! timed "$out.cpu" "$GOBIN/driverbench" -url "$base" -n "$requests" -c "$concurrency" >"$out" 2>"$out.err"; then
		cat "$out" "$out.err" >&2
		log "driver-vs-peer: driver run failed"
		exit 1
	fi
	kv driver_wall_s "$out" >"$work/driver.wall"
	echo "$(kv driver_rps "$out") $(kv driver_peak_rss_mb "$out") $(kv driver_peak_heap_mb "$out") $(cpu_us "$out.cpu")" >"$out.vals"
}

run_peer() { # round
	local out="$work/peer.$1"
	if [[ "$peer" == hey* ]]; then
		timed "$out.cpu" "$GOBIN/hey" -n "$requests" -c "$concurrency" -m POST -T application/json -D "$work/body.json" "$url" >"$out"
		local ok
		ok="$(sed -n 's/^ *\[200\][[:space:]]*\([0-9]*\) responses.*/\1/p' "$out")"
		if [[ "$ok" != "$requests" ]]; then
			cat "$out" >&2
			log "driver-vs-peer: hey got ${ok:-0} of $requests 200 answers"
			exit 1
		fi
		echo "$(sed -n 's/^ *Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$out") $(cpu_us "$out.cpu")" >"$out.vals"
	else
		# vegeta counts time, not requests: run it for the driver's latest wall time.
		local secs
		secs="$(cat "$work/driver.wall")"
		printf 'POST %s\nContent-Type: application/json\n@%s\n' "$url" "$work/body.json" >"$work/targets"
		timed "$out.cpu" "$GOBIN/vegeta" attack -targets "$work/targets" -rate 0 -workers "$concurrency" \
			-max-workers "$concurrency" -duration "${secs}s" >"$work/vegeta.bin"
		"$GOBIN/vegeta" report -type json <"$work/vegeta.bin" >"$out"
		local total
		total="$(sed -n 's/.*"requests":\([0-9]*\).*/\1/p' "$out")"
		echo "$(sed -n 's/.*"throughput":\([0-9.]*\).*/\1/p' "$out") $(awk -v n="${total:-0}" '{ if (n > 0) printf "%.1f", ($1 + $2) * 1e6 / n; else print "nan" }' "$out.cpu")" >"$out.vals"
	fi
}

# The driver must go first once so the server has captured its body.
driver_rps=() peer_rps=() rss=() heap=() driver_cpu=() peer_cpu=()
for round in $(seq 1 "$rounds"); do
	if ((round % 2 == 1)); then
		run_driver "$round"
		run_peer "$round"
	else
		run_peer "$round"
		run_driver "$round"
	fi
	read -r d r h dc <"$work/driver.$round.vals"
	read -r p pc <"$work/peer.$round.vals"
	log "round $round: driver ${d} req/s, ${dc} us CPU/request (peak RSS ${r} MB, peak heap ${h} MB); peer ${p} req/s, ${pc} us CPU/request"
	driver_rps+=("$d") peer_rps+=("$p") rss+=("$r") heap+=("$h") driver_cpu+=("$dc") peer_cpu+=("$pc")
done

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
maximum() { printf '%s\n' "$@" | sort -g | tail -1; }

d="$(median "${driver_rps[@]}")"
p="$(median "${peer_rps[@]}")"
r="$(maximum "${rss[@]}")"
h="$(maximum "${heap[@]}")"
dc="$(median "${driver_cpu[@]}")"
pc="$(median "${peer_cpu[@]}")"
ratio="$(awk -v d="$d" -v p="$p" 'BEGIN { printf "%.2f", d / p }')"

echo "requests: $requests, concurrency: $concurrency, rounds: $rounds (medians), peer: $peer, cpus: $(nproc)"
echo "driver throughput: $d req/s (client CPU $dc us/request)"
echo "peer throughput: $p req/s (client CPU $pc us/request)"
echo "driver peak RSS: $r MB (limit ${rss_limit_mb} MB), peak live heap: $h MB"
echo "driver/peer throughput ratio: $ratio"

if [[ "$strict" == 1 ]]; then
	awk -v x="$ratio" -v r="$r" -v lim="$rss_limit_mb" 'BEGIN { exit !(x >= 1.0 && r < lim) }' || {
		log "driver-vs-peer: goal missed (ratio >= 1.0 and RSS < ${rss_limit_mb} MB)"
		exit 1
	}
fi
