#!/usr/bin/env bash
# The GPU checks (check, bench, node, run and their GPU tests), as one prepared script for a lent GPU machine (the `device` tool's `run`):
# installs ddpdoctor next to the machine's torch, runs the GPU tests and the NCCL paths, and
# leaves what they printed in $OUT (or ./device-out). Bounded: every command has a timeout.
set -uo pipefail
OUT=${OUT:-device-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-deps -e . >"$OUT/install.log" 2>&1 || python3 -m pip install -q -e . >>"$OUT/install.log" 2>&1
{
  nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"
  timeout 120 python3 -m ddpdoctor env --markdown
  timeout 180 python3 -m ddpdoctor check -v --timeout 60 --json "$OUT/check.json"; echo "check rc=$?"
  CUDA_VISIBLE_DEVICES=0 timeout 180 python3 -m ddpdoctor check --nproc 2 --backend nccl --only env,rank_device; echo "shared-gpu rc=$?"
  timeout 240 python3 -m ddpdoctor bench-allreduce --min-bytes 1M --max-bytes 1G --iters 20 --json "$OUT/bench.json"; echo "bench rc=$?"
  timeout 120 python3 -m ddpdoctor node --json "$OUT/node.json"; echo "node rc=$?"
  timeout 180 python3 -m ddpdoctor run --nproc 1 --json "$OUT/run.json" -- tests/fixtures/run/gpu/clean_one_gpu_each.py; echo "run rc=$?"
  CUDA_VISIBLE_DEVICES=0 timeout 180 python3 -m ddpdoctor run --nproc 2 --backend nccl -- tests/fixtures/run/gpu/shared_gpu.py; echo "run shared-gpu rc=$?"
  timeout 300 python3 -m pytest -q tests/gpu tests/trace/test_trace_gpu.py; echo "pytest rc=$?"
} 2>&1 | tee "$OUT/device.log"
