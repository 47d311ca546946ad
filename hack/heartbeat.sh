#!/usr/bin/env bash
# Run a long, quiet command and say every 20 seconds that it is still going,
# so a log never sits silent through minutes of compiling.
#   hack/heartbeat.sh "unit tests" go test ./...
# The command's exit status is the script's; Ctrl-C reaches the command
# through the process group as usual, and nothing of this script outlives
# it by more than a second.
set -uo pipefail
what="$1"
shift
start=$SECONDS
next=20
"$@" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  sleep 1
  if (( SECONDS - start >= next )); then
    echo "… still running the $what ($((SECONDS - start)) s)"
    next=$((next + 20))
  fi
done
wait "$pid"
