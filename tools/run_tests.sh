#!/usr/bin/env bash
# Fresh machine to green tests: install dependencies, build with warnings as errors, run the unit,
# golden and end-to-end tests, then again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh chromium python3
tools/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 300)
BUILD_DIR=build-asan tools/build.sh -DTRAINSIM_SANITIZE=ON -DTRAINSIM_CUDA=OFF -DTRAINSIM_BENCHMARKS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j2 --timeout 600)
