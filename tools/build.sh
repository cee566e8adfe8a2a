#!/usr/bin/env bash
# Configures and builds into build/ (or $BUILD_DIR) with the given extra CMake options.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(( $(nproc) < 2 ? 1 : 2 ))}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DTRAINSIM_WERROR=ON "$@" > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log"; exit 1; }
cmake --build "$dir" -j"$jobs"
