#!/usr/bin/env bash
# The main job, end to end on a CPU in well under 15 minutes, nothing downloaded:
#   1. .venv via scripts/setup_env.sh
#   2. an English corpus (>= 1 MB) from the docstrings of this Python's standard library
#   3. a small SentencePiece model trained on it
#   4. pretraining TFRecords + record_info.json
#   5. a few hundred steps of XLNet pretraining (tiny model) with memory, bi_data, AdamW
#   6. the held-out loss (documents never trained on) against the unigram baselines
#   7. export as a SavedModel (features) and one call of it from a fresh process
#
# Environment knobs (defaults give the README run): OUT (runs/demo), STEPS (1200), SEQ_LEN (64),
# BATCH (32), VOCAB (1000), DROPOUT (0.1, the paper's), EVAL_FRACTION (0.05 of the documents held
# out), MAX_BYTES (corpus cap, empty = the whole library), SKIP_SETUP=1.
# Each stage reads only what the previous one wrote: the pretraining model_dir holds the
# architecture, the SentencePiece model and the run settings, and export needs nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-runs/demo}"
STEPS="${STEPS:-1200}"
SEQ_LEN="${SEQ_LEN:-64}"
BATCH="${BATCH:-32}"
VOCAB="${VOCAB:-1000}"
DROPOUT="${DROPOUT:-0.1}"
MIN_BYTES="${MIN_BYTES:-1000000}"
MAX_BYTES="${MAX_BYTES:-}"
LOG_STEPS="${LOG_STEPS:-100}"
EVAL_FRACTION="${EVAL_FRACTION:-0.05}"
# The final held-out loss must be at least MIN_MARGIN nats below the held-out unigram baseline
# (shortened test runs lower it).
MIN_MARGIN="${MIN_MARGIN:-0.3}"
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
START=$(date +%s)

if [ "${SKIP_SETUP:-0}" != "1" ]; then
  bash scripts/setup_env.sh
fi
PY=.venv/bin/python
mkdir -p "$OUT"
REUSE=$((SEQ_LEN / 2))
NUM_PREDICT=$((SEQ_LEN / 6))
# bi_data: each step reads BATCH/2 streams forward and the same ones backward.
STREAMS=$((BATCH / 2))

echo "== 1/6 corpus: standard-library docstrings"
$PY data_prep/build_corpus.py --output="$OUT/corpus.txt" --min_bytes="$MIN_BYTES" \
  ${MAX_BYTES:+--max_bytes=$MAX_BYTES}

echo "== 2/6 SentencePiece model ($VOCAB pieces)"
$PY data_prep/train_sentencepiece.py --input="$OUT/corpus.txt" --vocab_size="$VOCAB" \
  --model_prefix="$OUT/spiece"

echo "== 3/6 TFRecords (seq_len $SEQ_LEN, reuse_len $REUSE, num_predict $NUM_PREDICT, bi_data;" \
  "$EVAL_FRACTION of the documents held out in $OUT/data/eval)"
$PY data_prep/create_tfrecords.py --input="$OUT/corpus.txt" --spm_model="$OUT/spiece.model" \
  --output_dir="$OUT/data" --seq_len="$SEQ_LEN" --reuse_len="$REUSE" \
  --num_predict="$NUM_PREDICT" --num_streams="$STREAMS" --bi_data --overwrite \
  --eval_fraction="$EVAL_FRACTION"

echo "== 4/6 pretraining a tiny XLNet for $STEPS steps (dropout $DROPOUT, memory, bi_data)"
# The architecture (the original xlnet_config.json keys); run-time settings are flags.
cat > "$OUT/model_config.json" <<JSON
{"n_layer": 3, "d_model": 128, "n_head": 4, "d_head": 32, "d_inner": 512,
 "ff_activation": "gelu", "untie_r": true, "n_token": $VOCAB}
JSON
rm -rf "$OUT/model"
$PY experiments/run_pretrain.py --data_dir="$OUT/data" --model_dir="$OUT/model" \
  --model_config="$OUT/model_config.json" --train_batch_size="$BATCH" --train_steps="$STEPS" \
  --steps_per_loop=50 --log_steps="$LOG_STEPS" --learning_rate=5e-4 \
  --warmup_steps=$((STEPS / 10)) --save_steps=$((STEPS / 3 > 0 ? STEPS / 3 : 1)) --weight_decay=0.01 --mem_len="$REUSE" --dropout="$DROPOUT" --dropatt="$DROPOUT" \
  --record_steps --eval_steps=$((STEPS / 4 > 0 ? STEPS / 4 : 1)) --eval_batches=10

echo "== 5/6 held-out loss against the unigram baselines"
$PY benchmarks/heldout_report.py --model_dir="$OUT/model" --data_dir="$OUT/data" \
  --eval_dir="$OUT/data/eval" --global_batch_size="$BATCH" --min_margin="$MIN_MARGIN" \
  --summary_json="$OUT/demo_summary.json"

echo "== 6/6 export: SavedModel for TF Serving (token and pooled features, text in)"
# Straight from the pretraining model_dir: architecture, vocabulary and seq_len are there.
rm -rf "$OUT/export"
$PY experiments/export_saved_model.py --model_dir="$OUT/model" --kind=features \
  --checkpoint=latest --export_dir="$OUT/export"
# Call it the way a client would: a fresh process with TensorFlow and tensorflow-text only.
# (TensorFlow's start-up lines go to client.log; shown only if the call fails)
$PY - "$OUT/export/1" 2>"$OUT/client.log" <<'PY' || { cat "$OUT/client.log"; exit 1; }
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece op)
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
text = "Return a new list containing all items from the iterable in ascending order."
out = serve(**{name: tf.constant([text]) for name in serve.structured_input_signature[1]})
print("exported model at", sys.argv[1], "answers:",
      {k: tuple(v.shape) for k, v in sorted(out.items())})
PY
echo "Demo finished in $(( $(date +%s) - START )) s."
