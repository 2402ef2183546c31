#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# Installs what a fresh Debian 12 machine lacks to build and test twellscope (idempotent).
# The CUDA toolkit is expected at /usr/local/cuda; without it the build is CPU-only.
set -euo pipefail
packages=(build-essential cmake ninja-build git pkg-config nlohmann-json3-dev libgtest-dev libcli11-dev
          qt6-base-dev libqcustomplot-dev libqcustomplot2.1-qt6 xvfb xauth fonts-dejavu-core
          clang-14 libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
