#!/usr/bin/env bash
# The training demo: builds braid-train (Release, in build-train/) and trains the
# GPT-style character model on 4 local ranks through Braid, laid out as
# dp=2 x tp=2 x pp=1 (two data-parallel replicas, each split across two tensor-parallel
# ranks), on ../shared/data/tinyshakespeare.txt when it exists (else on a generated
# Markov corpus, whose entropy rate is printed as the floor).
#
#   scripts/run-train.sh                 # the demo (a few minutes on 2 cores)
#   scripts/run-train.sh --steps 50      # extra flags go to braid-train (see --help)
#   BRAID_TRAIN_LAYOUT="--tp 2 --pp 2 --microbatches 4" scripts/run-train.sh
#
# Writes build-train/demo/{log.csv,log.json,loss.png}. Environment: BRAID_JOBS (build
# parallelism, default nproc), BRAID_TRAIN_RANKS (default 4), BRAID_TRAIN_LAYOUT
# (default "--dp 2 --tp 2").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=${BRAID_JOBS:-$(nproc)}
ranks=${BRAID_TRAIN_RANKS:-4}
layout=${BRAID_TRAIN_LAYOUT:-"--dp 2 --tp 2"}

cmake -S . -B build-train -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build-train -j "$jobs" --target braid-train braidrun

out=build-train/demo
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
# shellcheck disable=SC2086  # the layout is a list of flags
exec build-train/bin/braidrun -n "$ranks" -- build-train/bin/braid-train $layout \
  --width 64 --layers 2 --heads 4 --context 64 --batch 16 --lr 6e-3 \
  --steps 1500 --eval-every 250 --eval-batches 4 --bucket-kib 64 \
  --log-csv "$out/log.csv" --log-json "$out/log.json" --plot "$out/loss.png" "$@"
