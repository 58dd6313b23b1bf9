#!/usr/bin/env bash
# torch.install: `pip install ./python/torch_braid` as a user runs it, then its wheel.
#   install.sh <venv python with the pinned torch> <Braid source tree>
# Copies the tracked files of the source tree (as they are now, edits included, no build
# outputs) to a temporary folder, makes a fresh venv there that sees the pinned venv's
# packages but torch_braid through a .pth file (no reinstall of torch), and runs pip install on the copy's
# python/torch_braid with build isolation and no BRAID_HOME: setup.py must build Braid
# itself and bundle libbraid.so. Then `pip wheel` (the wheel must hold the extension and
# libbraid.so), removes the copy, and runs install_check.py (an all-reduce on 2 processes,
# on the bundled library) in that venv and in a second fresh venv that installed only the
# wheel. The CPU path only (BRAID_TORCH_CUDA=0): nvcc would add minutes.
# Skips (77) without the venv, without git, or when pip cannot fetch the build
# requirements (setuptools, wheel, ninja) from the package index.
set -euo pipefail
py=$1
src=$2
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
[ -x "$py" ] || skip "no Python environment at $py"
venv=$(dirname "$(dirname "$py")")
[ -f "$venv/SKIPPED" ] && skip "$(cat "$venv/SKIPPED")"
"$py" -c 'import torch' 2>/dev/null || skip "torch does not import in $venv"
git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
  skip "$src is not a git checkout (the test copies its tracked files)"
torch_site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')

tmp=$(mktemp -d "${TMPDIR:-/tmp}/braid-torch-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
step() { echo "== $* ($((SECONDS - t0)) s)"; }
t0=$SECONDS

# The clean tree: tracked files that exist in the working tree.
mkdir "$tmp/src"
git -C "$src" ls-files -z | while IFS= read -r -d '' f; do
  if [ -e "$src/$f" ] || [ -L "$src/$f" ]; then printf '%s\0' "$f"; fi
done | tar -C "$src" --null -T - -cf - | tar -C "$tmp/src" -xf -

# What the fresh venvs see of the pinned venv: its site-packages (torch, its
# dependencies, pip) but no torch_braid.
mkdir "$tmp/pinned"
for f in "$torch_site"/*; do
  case ${f##*/} in torch_braid|torch_braid-*) ;; *) ln -s "$f" "$tmp/pinned/" ;; esac
done
# A fresh venv (without pip: the pinned one's, seen through the .pth, installs into it).
newvenv() {
  "$py" -m venv --without-pip "$1"
  local site
  site=$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$tmp/pinned" > "$site/pinned-torch.pth"
}
newvenv "$tmp/venv"
step "clean tree and venv made"

# What a user's shell may hold must not steer the build.
unset BRAID_HOME BRAID_SOURCE_DIR BRAID_CMAKE_ARGS PIP_NO_BUILD_ISOLATION
export BRAID_TORCH_CUDA=0 MAX_JOBS=${MAX_JOBS:-2} PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
pip() {  # pip <log> <args...>: fails, or skips where the index cannot be reached
  local log=$1; shift
  if ! (cd "$tmp" && "$tmp/venv/bin/python" -m pip "$@") >"$log" 2>&1; then
    if grep -qE "No matching distribution found for (setuptools|wheel|ninja)|NewConnectionError|Network is unreachable|Temporary failure in name resolution|ProxyError" "$log"; then
      tail -5 "$log"
      skip "pip cannot fetch the build requirements (setuptools, wheel, ninja) from the package index"
    fi
    tail -40 "$log"
    echo "FAIL: pip $*"
    exit 1
  fi
}
# --no-deps: the requirement on torch is checked below, so that a wrong one fails here
# instead of downloading another torch.
pip "$tmp/install.log" install -v --no-deps "$tmp/src/python/torch_braid"
grep -E "torch_braid: building Braid's library" "$tmp/install.log" ||
  { tail -40 "$tmp/install.log"; echo "FAIL: pip install did not build Braid"; exit 1; }
step "pip install ./python/torch_braid (build isolation, Braid built and bundled)"

pip "$tmp/wheel.log" wheel --no-deps -w "$tmp/wheels" "$tmp/src/python/torch_braid"
wheel=$(ls "$tmp"/wheels/torch_braid-*.whl)
listing=$("$py" -m zipfile -l "$wheel")
echo "$listing"
for f in 'torch_braid/libbraid\.so ' 'torch_braid/_C\..*\.so ' 'torch_braid/__init__\.py '; do
  grep -qE "^$f" <<<"$listing" || { echo "FAIL: $wheel lacks ${f%% }"; exit 1; }
done
step "pip wheel"
rm -rf "$tmp/src"

site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ext=$(ls "$site"/torch_braid/_C*.so)
dyn=$(readelf -d "$ext")
grep -E "NEEDED|RUNPATH|RPATH" <<<"$dyn"
grep -qE '\(RUNPATH\).*\[\$ORIGIN\]' <<<"$dyn" || { echo "FAIL: $ext's run path is not \$ORIGIN"; exit 1; }
grep -qE '\(NEEDED\).*\[libbraid\.so' <<<"$dyn" || { echo "FAIL: $ext does not need libbraid.so"; exit 1; }
if grep -qE '\(NEEDED\).*\[libnccl' <<<"$dyn"; then echo "FAIL: $ext needs libnccl"; exit 1; fi
torch_version=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])')
requires=$("$tmp/venv/bin/python" -c 'from importlib.metadata import requires; print(requires("torch_braid"))')
[ "$requires" = "['torch==$torch_version']" ] ||
  { echo "FAIL: torch_braid requires $requires, want ['torch==$torch_version']"; exit 1; }
(cd "$here" && "$tmp/venv/bin/python" install_check.py)
step "the installed package, with the source copy gone"

newvenv "$tmp/venv2"
(cd "$tmp" && "$tmp/venv2/bin/python" -m pip install --no-deps --quiet "$wheel")
(cd "$here" && "$tmp/venv2/bin/python" install_check.py)
step "the wheel, in a second venv"
echo "ok: pip install and pip wheel of python/torch_braid"
