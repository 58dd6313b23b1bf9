#!/usr/bin/env bash
# The NCCL functions the pinned PyTorch imports, against what Braid exports.
#   symbols.sh <venv python> <libnccl.so.2 of Braid>
# Lists every nccl* symbol libtorch_cuda.so needs (undefined in it) and fails naming
# those Braid's library does not define. Skips (77) without the venv or a CUDA torch.
set -uo pipefail
py=$1
lib=$2
[ -x "$py" ] || { echo "SKIP: no Python environment at $py"; exit 77; }
venv=$(dirname "$(dirname "$py")")
[ -f "$venv/SKIPPED" ] && { echo "SKIP: $(cat "$venv/SKIPPED")"; exit 77; }
torchlib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))') ||
  { echo "SKIP: torch does not import in $venv"; exit 77; }
tc=$torchlib/libtorch_cuda.so
[ -f "$tc" ] || { echo "SKIP: $tc missing (a CPU-only torch imports no NCCL)"; exit 77; }
need=$(nm -D --undefined-only "$tc" | awk '{print $NF}' | sed 's/@.*//' | grep -E '^nccl' | sort -u)
have=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
missing=$(comm -23 <(echo "$need") <(echo "$have"))
echo "libtorch_cuda.so ($("$py" -c 'import torch; print(torch.__version__)')) imports $(echo "$need" | wc -l) NCCL functions:"
echo "$need" | paste -sd' '
if [ -n "$missing" ]; then
  echo "FAIL: Braid ($lib) lacks: $(echo "$missing" | paste -sd' ')"
  exit 1
fi
echo "ok: Braid exports all of them"
