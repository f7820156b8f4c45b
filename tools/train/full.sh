#!/usr/bin/env bash
# The full-size run, one stage group per GPU-machine call (each well under the 10-minute call limit):
#   bash tools/train/full.sh target    corpus + tokenizer (if missing) + target          (~9 min)
#   bash tools/train/full.sh drafter   corpus + re-encode (if missing) + drafter         (~8.5 min)
#   bash tools/train/full.sh eval      tau at T=0 and T=0.7 + z-lab format check         (~6 min)
# Everything lands in $W (default tools/train/work/full, git-ignored); logs in $W/logs.
# A fresh machine keeps nothing: the data stages are deterministic and are redone when missing; the drafter
# and eval stages then need the trained target (carry tools/train/work/full/target, 48 MB), and eval the drafter.
# Budgets: TARGET_STEPS (default 2600) / TARGET_MINUTES (7.6), DRAFTER_MINUTES (8), EVAL_MINUTES (5).
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${W:-tools/train/work/full}
L=$W/logs
T=tools/train
PY=${PYTHON:-python3}
mkdir -p "$L"
export PYTHONUNBUFFERED=1

data() {
  if [ -f "$W/data/meta.json" ]; then return; fi
  $PY $T/corpus.py --out "$W/corpus" 2>&1 | tee "$L/corpus.out"
  if [ -f "$W/target/tokenizer.json" ]; then      # encode with the target's own tokenizer
    $PY $T/tokenizer.py --corpus "$W/corpus" --out "$W/tokenizer" --data "$W/data" --from-tokenizer "$W/target" \
      2>&1 | tee "$L/tokenizer.out"
  else
    $PY $T/tokenizer.py --corpus "$W/corpus" --out "$W/tokenizer" --data "$W/data" --vocab 8192 \
      2>&1 | tee "$L/tokenizer.out"
  fi
}

case "${1:-}" in
  data)
    data ;;
  target)
    data
    $PY $T/train_target.py --data "$W/data" --tokenizer "$W/tokenizer" --out "$W/target" --log "$L/target.jsonl" \
      --steps "${TARGET_STEPS:-2600}" --max-minutes "${TARGET_MINUTES:-7.6}" 2>&1 | grep -v '^event=train' \
      | tee "$L/target.out" ;;
  drafter)
    data
    $PY $T/train_drafter.py --target "$W/target" --data "$W/data" --out "$W/drafter" --log "$L/drafter.jsonl" \
      --max-minutes "${DRAFTER_MINUTES:-8}" 2>&1 | grep -v '^event=train\|^event=generate' | tee "$L/drafter.out" ;;
  eval)
    data
    $PY $T/eval_tau.py --target "$W/target" --drafter "$W/drafter" --data "$W/data" --out "$L/eval.json" \
      --max-minutes "${EVAL_MINUTES:-5}" 2>&1 | tee "$L/eval.out"
    $PY $T/check_zlab.py --target "$W/target" --drafter "$W/drafter" --data "$W/data" \
      --tau "${ZLAB_TAU_PROMPTS:-32}" --eval-json "$L/eval.json" 2>&1 | tee "$L/zlab.out" ;;
  *)
    echo "usage: $0 data|target|drafter|eval" >&2; exit 2 ;;
esac
