#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Installs dependencies, builds everything (CUDA compiled when the toolkit is present) and runs
# every test tier: cpu, gui (offscreen Qt) and gpu (skipped with a reason where no GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
cmake --preset ci >/dev/null
cmake --build --preset ci -j "$jobs"
ctest --preset ci -j "$jobs" --timeout 600
