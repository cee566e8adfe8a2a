#!/usr/bin/env bash
# Renders the README's report picture: `planner report` on the scenario, screenshotted by headless
# Chromium at the page's width. Run it from a built tree after anything that changes the report.
#   tools/render_report_image.sh [scenario] [png]
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-scenarios/llama3-70b-8-to-64-nodes.json}
png=${2:-${scenario%.json}.report.png}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/planner report "$scenario" -o "$work/report.html"
# The page is 1,100 px wide; the window is tall enough for all of it.
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=1100,3300 --screenshot="$work/report.png" \
  "file://$work/report.html" > "$work/chromium.log" 2>&1 || { cat "$work/chromium.log"; exit 1; }
mv "$work/report.png" "$png"
echo "$png"
