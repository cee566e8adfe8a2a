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
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$work/profile")
# The page is 1,100 px wide. Its height, as laid out at that width, is read first from a copy that
# writes it into its title; the screenshot's window is that tall.
sed 's#</body>#<script>document.title = "height=" + document.documentElement.scrollHeight;</script></body>#' \
  "$work/report.html" > "$work/measure.html"
height=$(timeout 120 chromium "${flags[@]}" --window-size=1100,1000 --dump-dom "file://$work/measure.html" 2> "$work/chromium.log" |
  sed -n 's#.*<title>height=\([0-9]*\)</title>.*#\1#p')
[[ -n "$height" ]] || { cat "$work/chromium.log"; echo "could not read the page's height" >&2; exit 1; }
timeout 120 chromium "${flags[@]}" --window-size=1100,"$height" --screenshot="$work/report.png" \
  "file://$work/report.html" > "$work/chromium.log" 2>&1 || { cat "$work/chromium.log"; exit 1; }
mv "$work/report.png" "$png"
echo "$png"
