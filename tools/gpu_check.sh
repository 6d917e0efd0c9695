#!/usr/bin/env bash
# The GPU check of issue 28 in one command: install the kit (tools/gpu_kit.sh's wheels), then run every step of
# tools/gpu_check.py under one time budget, results under $OUT (at most 8 files: what the device tool brings back).
#
#   On the lent GPU machine (an H100; Python 3.12 with torch + CUDA; the kit carried in .whl/):
#     bash tools/gpu_check.sh                  # --budget 500 by default: the call's limit less the kit install
#   Here or in CI, the same steps on the CPU with the tiny model, the kit fetched for this Python first:
#     KIT_DIR=/tmp/kit KIT_PYTHON_VERSION=3.11 bash tools/gpu_kit.sh
#     PYTHON=.venv/bin/python OUT=/tmp/gpu-check-out bash tools/gpu_check.sh --dry-run --kit /tmp/kit
#
# Options: --dry-run, --kit DIR (default .whl), --budget SECONDS (default 500; 600 with --dry-run, whose steps take
# ~255 s on a 2-core machine and more on a busy CI one: at 300 it once timed out step i after 278 s); after --,
# options of tools/gpu_check.py (--steps streams profile ...: which steps, in that order; --peers faster: which peers).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."  # the repository root

dry_run=""
kit=.whl
budget=""
extra=()
while (($#)); do
  case $1 in
    --dry-run) dry_run=--dry-run ;;
    --kit) kit=$2; shift ;;
    --budget) budget=$2; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "unknown option $1 (see the head of $0)" >&2; exit 2 ;;
  esac
  shift
done
budget=${budget:-$([[ -n $dry_run ]] && echo 600 || echo 500)}
python=${PYTHON:-python3}
out=${OUT:?set OUT to the folder for the results}
site=${GPU_CHECK_SITE:-/tmp/gpu-check-site}
mkdir -p "$out"

started=$SECONDS
# Three separate targets: the official package and faster-qwen3-tts both ship a module `qwen_tts`, and each
# peer runs in its own process with its folder first on the path (bench/peers.py).
for target in ours official faster; do
  [[ -d $kit/$target ]] || { echo "no $kit/$target: run tools/gpu_kit.sh first" >&2; exit 1; }
  rm -rf "${site:?}/$target"
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
    --target "$site/$target" "$kit/$target"/*.whl
done
echo "kit: installed in $((SECONDS - started)) s"
export PYTHONPATH=$site/ours:$PWD/src${PYTHONPATH:+:$PYTHONPATH}
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1

{
  echo "# $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 || true
  "$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
} >"$out/gpu_check.log" 2>&1
head -n 4 "$out/gpu_check.log"

exec "$python" tools/gpu_check.py --out "$out" --budget "$((budget - (SECONDS - started)))" $dry_run \
  --peer "official=$site/official" --peer "faster=$site/faster" "${extra[@]}"
