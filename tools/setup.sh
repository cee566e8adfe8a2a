#!/usr/bin/env bash
# Installs the build dependencies from Debian/Ubuntu packages, skipping what is already present
# (the GPU machine has everything and cannot install).
set -euo pipefail
need=()
for pkg in cmake g++ make libboost-graph-dev libeigen3-dev libcli11-dev nlohmann-json3-dev libbenchmark-dev \
           libgtest-dev libopenmpi-dev openmpi-bin "$@"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
else
  echo "setup: all build dependencies present"
fi
