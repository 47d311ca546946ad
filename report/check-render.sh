#!/usr/bin/env bash
# Render qualification.html in headless Debian chromium and check that the
# split charts drew: the screenshot must hold pixels of the bars' fill colour
# (report.BarFill). No network is used: the page is self-contained.
#   report/check-render.sh [artifacts/qualification.html]
# SCREENSHOT=path keeps the PNG; CHROMIUM overrides the browser path.
set -euo pipefail
cd "$(dirname "$0")/.."

html="${1:-artifacts/qualification.html}"
chromium="${CHROMIUM:-/usr/bin/chromium}"
fill="#1f77b4"        # keep in step with report.BarFill
min_pixels="${MIN_PIXELS:-200}"

if [[ ! -f "$html" ]]; then
  echo "check-render: $html does not exist; run make e2e first" >&2
  exit 2
fi
if [[ ! -x "$chromium" ]]; then
  echo "check-render: $chromium is not installed (apt-get install -y chromium)" >&2
  exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
shot="$tmp/qualification.png"
abs="$(cd "$(dirname "$html")" && pwd)/$(basename "$html")"

# A fresh profile, no background traffic, a fixed window; the timeout keeps a
# wedged browser from hanging CI.
timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
  --disable-background-networking --disable-component-update --disable-sync \
  --no-first-run --user-data-dir="$tmp/profile" \
  --screenshot="$shot" --window-size=1280,2000 "file://$abs" >"$tmp/chromium.log" 2>&1 || {
    echo "check-render: chromium failed:" >&2
    cat "$tmp/chromium.log" >&2
    exit 1
  }
if [[ ! -s "$shot" ]]; then
  echo "check-render: chromium wrote no screenshot" >&2
  cat "$tmp/chromium.log" >&2
  exit 1
fi
if [[ -n "${SCREENSHOT:-}" ]]; then cp "$shot" "$SCREENSHOT"; fi
go run ./report/internal/pngcolor -color "$fill" -min "$min_pixels" "$shot"
echo "check-render: $html renders with its charts"
