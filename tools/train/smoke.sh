#!/usr/bin/env bash
# Tiny end-to-end check of the whole pipeline on the GPU machine (about 3 minutes):
# drafter self-test -> corpus (400 stdlib files) -> tokenizer (1k vocab) -> target (~1.5M params, ~40 s)
# -> drafter (~40 s, generation included) -> tau evaluation -> format check against the z-lab reference.
# Usage: bash tools/train/smoke.sh [WORKDIR]   (default tools/train/work/tiny; logs in WORKDIR/logs)
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${1:-tools/train/work/tiny}
L=$W/logs
T=tools/train
PY=${PYTHON:-python3}
mkdir -p "$L"
export PYTHONUNBUFFERED=1
STDLIB=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')

stage() {   # stage NAME CMD...: runs CMD, tees its output to $L/NAME.out, records the wall time
  local name=$1; shift
  local t0; t0=$(date +%s%N)
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$L/$name.out"
  echo "$name $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$L/timings.txt"
}

$PY - <<'PYEOF' | tee "$L/env.txt"
import sys, torch, transformers, tokenizers, safetensors
try:
    from transformers.utils import is_flash_linear_attention_available as fla
    fla = fla()
except Exception as e:  # noqa: BLE001
    fla = f"unknown ({e})"
print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__,
      "tokenizers", tokenizers.__version__, "safetensors", safetensors.__version__,
      "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "fla", fla)
PYEOF

stage selftest $PY $T/dflash_model.py --selftest
stage corpus $PY $T/corpus.py --out "$W/corpus" --roots "$STDLIB" --max-files 400 --val-permille 50
stage tokenizer $PY $T/tokenizer.py --corpus "$W/corpus" --out "$W/tokenizer" --data "$W/data" --vocab 1024
stage target $PY $T/train_target.py --data "$W/data" --tokenizer "$W/tokenizer" --out "$W/target" \
  --log "$L/target.jsonl" --hidden 128 --layers 8 --intermediate 256 --heads 2 --kv-heads 1 --head-dim 64 \
  --linear-key-heads 2 --linear-value-heads 4 --linear-key-dim 32 --linear-value-dim 32 \
  --seq-len 256 --batch 32 --lr 3e-3 --warmup-steps 20 --eval-every 100 --eval-batches 4 --log-every 20 \
  --max-minutes 0.75 --reserve-minutes 0.1
stage drafter $PY $T/train_drafter.py --target "$W/target" --data "$W/data" --out "$W/drafter" \
  --log "$L/drafter.jsonl" --layers 1 --intermediate 256 --prompt-lens 32,64 --gen-len 96 --gen-batch 256 \
  --max-seqs 1536 --gen-minutes 0.2 --val-seqs 32 --batch 16 --anchors 32 --warmup-steps 20 --eval-every 100 \
  --log-every 20 --max-minutes 0.75 --reserve-minutes 0.1
stage eval $PY $T/eval_tau.py --target "$W/target" --drafter "$W/drafter" --data "$W/data" --out "$L/eval.json" \
  --num-prompts 8 --prompt-len 32 --max-new 64 --check-greedy 4 --max-minutes 0.5
stage zlab $PY $T/check_zlab.py --target "$W/target" --drafter "$W/drafter" --data "$W/data"

cp "$W/corpus/stats.json" "$L/corpus_stats.json"
cp "$W/tokenizer/tokenizer_stats.json" "$L/tokenizer_stats.json"
cp "$W/target/training_summary.json" "$L/target_summary.json"
cp "$W/target/config.json" "$L/target_config.json"
cp "$W/drafter/training_summary.json" "$L/drafter_summary.json"
cp "$W/drafter/config.json" "$L/drafter_config.json"
ls -l "$W/target" "$W/drafter" > "$L/checkpoint_files.txt"
echo "smoke: all stages passed"
