#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Installs dependencies, builds, profiles the built-in demo model (CUDA when a GPU is present, the
# CPU otherwise) and opens the result in the desktop app. Without a display it writes the report,
# its exports and the plots to out/demo/ and prints where.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$(nproc)" --target twellscope-cli twellscope
out=out/demo
mkdir -p "$out"
cli=build-dev/app/cli/twellscope-cli
gui=build-dev/app/gui/twellscope
"$cli" profile --demo --out "$out/report.json"
"$cli" export "$out/report.json" --format csv --out "$out/layers.csv"
"$cli" export "$out/report.json" --format kernels-csv --out "$out/kernels.csv"
"$cli" export "$out/report.json" --format trace --out "$out/trace.json"
"$cli" export "$out/report.json" --format markdown --out "$out/summary.md"
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
  exec "$gui" "$out/report.json"
fi
for view in overview heatmap timing speedup distributions kernels; do
  QT_QPA_PLATFORM=offscreen "$gui" --report "$out/report.json" --screenshot "$out/$view.png" --view "$view"
done
echo "No display: the report, its exports and the plots are in $(pwd)/$out"
cat "$out/summary.md"
