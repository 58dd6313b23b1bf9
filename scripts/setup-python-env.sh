#!/usr/bin/env bash
# Makes the Python environment the PyTorch tests, the torch_braid backend and the torch
# benchmark use: a venv with the pinned PyTorch (whose CUDA wheel brings NVIDIA's NCCL 2.30.7,
# the header and library the ABI tests compare against).
#   scripts/setup-python-env.sh <venv dir>     (scripts/run-tests.sh: build/venv)
# Idempotent: an existing venv with the pinned versions is kept. When PyPI cannot be
# reached, the venv gets a file SKIPPED naming why, and the tests that need it skip with
# that reason; the script still exits 0.
set -uo pipefail
venv=${1:?usage: setup-python-env.sh <venv dir>}
torch_version=2.15.0
nccl_wheel=nvidia-nccl-cu13==2.30.7
stamp="torch==$torch_version $nccl_wheel"

if [ -f "$venv/READY" ] && [ "$(cat "$venv/READY")" = "$stamp" ]; then
  echo "python env: $venv ready ($stamp)"
  exit 0
fi
skip() {
  mkdir -p "$venv"
  echo "$*" >"$venv/SKIPPED"
  echo "python env: SKIPPED: $*" >&2
  exit 0
}
rm -rf "$venv"
python3 -m venv "$venv" || skip "python3 -m venv failed (Debian: apt-get install python3-venv)"
py=$venv/bin/python
log=$venv/pip.log
start=$(date +%s)
echo "python env: installing torch==$torch_version and $nccl_wheel into $venv (about 5 GB)"
"$py" -m pip install --quiet --upgrade pip setuptools wheel >"$log" 2>&1 ||
  skip "pip cannot install from PyPI (see $log)"
"$py" -m pip install --quiet "torch==$torch_version" "$nccl_wheel" numpy ninja >>"$log" 2>&1 ||
  skip "pip install torch==$torch_version $nccl_wheel failed (see $log)"
"$py" -c "import torch, torch.distributed as d; assert d.is_available()" >>"$log" 2>&1 ||
  skip "torch==$torch_version does not import (see $log)"
rm -f "$venv/SKIPPED"
echo "$stamp" >"$venv/READY"
echo "python env: ready in $(($(date +%s) - start)) s"
