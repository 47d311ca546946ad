#!/usr/bin/env bash
# Render qualification.html in headless Debian chromium and check, from the
# screenshots' pixels, that what a reader looks at first drew:
#   - the headline: its background box (report.ColourHeadline) holds text;
#   - the claims × pairs matrix: every result the page has a cell for
#     (pass, fail, skip, N/A) shows that result's colour (report.Colour*);
#   - the bar charts, when the page has any (report.BarFill).
# No network is used: the page is self-contained.
#   report/check-render.sh [artifacts/qualification.html]
# SCREENSHOT=path keeps the top of the page (headline and matrix, 1280x1000);
# FULL_SCREENSHOT=path keeps the whole page; CHROMIUM overrides the browser.
set -euo pipefail
cd "$(dirname "$0")/.."

html="${1:-artifacts/qualification.html}"
chromium="${CHROMIUM:-/usr/bin/chromium}"
# Keep in step with report/chart.go and report/html.go (TestCheckRenderColoursMatchTheReport).
bar_fill="#0072b2"
headline_bg="#e3eef8"
matrix_frame="#56b4e9"
declare -A cell_colour=([pass]="#009e73" [fail]="#d55e00" [skip]="#f0e442" [na]="#dddddd")

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
abs="$(cd "$(dirname "$html")" && pwd)/$(basename "$html")"

# shot FILE HEIGHT: a fresh profile, no background traffic, a fixed window;
# the timeout keeps a wedged browser from hanging CI.
shot() {
  timeout 120 "$chromium" --headless --no-sandbox --disable-gpu \
    --disable-background-networking --disable-component-update --disable-sync \
    --no-first-run --hide-scrollbars --user-data-dir="$tmp/profile-$2" \
    --screenshot="$1" --window-size="1280,$2" "file://$abs" >"$tmp/chromium.log" 2>&1 || {
      echo "check-render: chromium failed:" >&2
      cat "$tmp/chromium.log" >&2
      exit 1
    }
  if [[ ! -s "$1" ]]; then
    echo "check-render: chromium wrote no screenshot" >&2
    cat "$tmp/chromium.log" >&2
    exit 1
  fi
}

go build -o "$tmp/pngcolor" ./report/internal/pngcolor
if ! grep -q 'id="headline"' "$html"; then
  echo "check-render: $html has no headline: the report did not render" >&2
  exit 1
fi
top="$tmp/top.png"
full="$tmp/full.png"
shot "$top" 1000
if [[ -n "${SCREENSHOT:-}" ]]; then cp "$top" "$SCREENSHOT"; fi

# The headline: dark text (glyphs, anti-aliased) inside its box.
"$tmp/pngcolor" -color '#000000' -tolerance 60 -within "$headline_bg" -min 400 -what "the headline text" "$top"

# The matrix: each result class it uses has its colour inside its frame.
if ! grep -q 'class="matrix"' "$html"; then
  echo "check-render: $html has no claims × pairs matrix: the report did not render" >&2
  exit 1
fi
for cls in pass fail skip na; do
  if grep -q "class=\"cell $cls\"" "$html"; then
    "$tmp/pngcolor" -color "${cell_colour[$cls]}" -within "$matrix_frame" -min 1500 -what "the matrix's $cls cells" "$top"
  fi
done

# The charts, further down: a screenshot as tall as the page may be.
shot "$full" "${FULL_HEIGHT:-8000}"
if [[ -n "${FULL_SCREENSHOT:-}" ]]; then cp "$full" "$FULL_SCREENSHOT"; fi
if grep -q 'class="chart"' "$html"; then
  "$tmp/pngcolor" -color "$bar_fill" -min 200 -what "the split charts" "$full"
fi
"$tmp/pngcolor" -height "$full"
echo "check-render: $html renders with its headline, matrix and charts"
