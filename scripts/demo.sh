#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Installs dependencies, builds, profiles the built-in demo model (CUDA when a GPU is present, the
# CPU otherwise) and opens the result in the desktop app. Without a display it writes the report,
# its exports and the plots to out/demo/ and prints where.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The demo runs where it is: CUDA compiled for this machine's GPU only (sm_90a on Hopper, for its own
# kernels), or, with no GPU to run on, the CPU-only product; the full multi-architecture build is
# the dev preset's.
if compute=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1) &&
   [ -n "$compute" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  arch=${compute/./}
  [ "$arch" = 90 ] && arch=90a
  cmake --preset dev -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null
  build=build-dev
else
  echo "No CUDA device visible: building the CPU-only product for the demo"
  cmake --preset cpu-only >/dev/null
  build=build-cpu-only
fi
cmake --build "$build" -j "$(nproc)" --target twellscope-cli twellscope
out=out/demo
mkdir -p "$out"
cli=$build/app/cli/twellscope-cli
gui=$build/app/gui/twellscope
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
