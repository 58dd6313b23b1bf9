#!/usr/bin/env bash
# Installs the Debian packages Braid's build, tests and perf suite need (as root on
# Debian bookworm). Skips apt entirely when everything is already installed.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config python3 python3-dev python3-venv python3-matplotlib
      libgtest-dev libgmock-dev libbenchmark-dev libhwloc-dev nlohmann-json3-dev
      libcli11-dev libopenmpi-dev openmpi-bin libgloo-dev libopenblas-dev libpng-dev iproute2 procps
      libibverbs-dev ibverbs-providers libucx-dev
      clang libclang-rt-14-dev)  # clang + libFuzzer: scripts/run-fuzz.sh
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
