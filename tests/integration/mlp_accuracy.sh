#!/bin/bash
# The full example, as the README runs it: examples/fashion_mnist/train.ini
# (784-512-512-10 MLP, SGD lr 0.05 momentum 0.9, batch 64, 3 epochs, seed 42,
# test set afterwards) must reach test accuracy >= 0.85 (the target; it gets
# ~0.861), and must leave the CSV log (lt_logs/version_0/metrics.csv) and
# the checkpoints (last.safetensors, best.safetensors) behind. Not BASE:
# BASE shrinks the model and skips the test stage. ~8 s on 2 cores.
source "$(dirname "$0")/common.sh"
it_init mlp_accuracy "$@"
TARGET=0.85
ROOT=$IT_TMP/acc

T0=$(now_ms)
run_ltrun acc --config "$SRC/examples/fashion_mnist/train.ini" --plugin-dir "$PLUGINS" \
    --default-root-dir "$ROOT" --set trainer.enable_progress_bar=false
awk -v ms=$(( $(now_ms) - T0 )) 'BEGIN { printf "  ltrun took %.1f s\n", ms / 1000 }'
sed -n '/^epoch .* done/p;/test results/p' "$IT_TMP/acc.out" | sed 's/^/    /'
check "ltrun exits 0" [ "$RC" -eq 0 ]
check "one process, batch 64" contains "$IT_TMP/acc.out" "effective batch size 64 = 64 per process x 1 "
check "3 epochs ran (epoch 2 done, step 2580)" contains "$IT_TMP/acc.out" "^epoch 2 done: step 2580,"

TEST_ACC=$(sed -n 's/.*test results:.* test_acc \([0-9.][0-9.]*\).*/\1/p' "$IT_TMP/acc.out" | tail -n 1)
echo "  test_acc = ${TEST_ACC:-(not printed)} (target >= $TARGET)"
check "a test_acc is printed" [ -n "$TEST_ACC" ]
check "test_acc ${TEST_ACC:-?} >= $TARGET" awk -v a="${TEST_ACC:-0}" -v t=$TARGET 'BEGIN { exit !(a + 0 >= t + 0) }'

CSV=$ROOT/lt_logs/version_0/metrics.csv
check "wrote lt_logs/version_0/metrics.csv" [ -s "$CSV" ]
HEADER=$(head -n 1 "$CSV" 2>/dev/null)
echo "  metrics.csv header: $HEADER"
check "the header has train_loss" grep -qE '(^|,)train_loss(,|$)' <<<"$HEADER"
check "the header has val_acc" grep -qE '(^|,)val_acc(,|$)' <<<"$HEADER"
check "the header has test_acc" grep -qE '(^|,)test_acc(,|$)' <<<"$HEADER"
# column of a header name in the CSV (1-based), then the values in that column
col() { awk -F, -v n="$1" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) print i; exit }' "$CSV"; }
VAL_COL=$(col val_acc); TEST_COL=$(col test_acc)
N_VAL=$(awk -F, -v c="${VAL_COL:-999}" 'NR > 1 && $c != "" { n++ } END { print n + 0 }' "$CSV")
check "metrics.csv has a val_acc for each of the 3 epochs ($N_VAL)" [ "$N_VAL" -eq 3 ]
CSV_TEST=$(awk -F, -v c="${TEST_COL:-999}" 'NR > 1 && $c != "" { v = $c } END { print v }' "$CSV")
check "metrics.csv's test_acc (${CSV_TEST:-none}) is the printed one" \
    awk -v a="${CSV_TEST:-0}" -v b="${TEST_ACC:--1}" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'

for f in last best; do
    check "wrote checkpoints/$f.safetensors" [ -s "$ROOT/checkpoints/$f.safetensors" ]
done
check "the full model: fc1.weight is [512,784]" \
    grep -q '"fc1.weight":{"dtype":"F32","shape":\[512,784\]' <(head -c 4096 "$ROOT/checkpoints/last.safetensors" 2>/dev/null)
# best.safetensors is the epoch with the highest val_acc (checkpoint.monitor = val_acc, mode = max)
MAX_VAL=$(awk -F, -v c="${VAL_COL:-999}" 'NR > 1 && $c != "" && (m == "" || $c + 0 > m + 0) { m = $c } END { print m }' "$CSV")
BEST_SCORE=$(head -c 4096 "$ROOT/checkpoints/best.safetensors" 2>/dev/null | grep -ao '"lt.best_score":"[^"]*"' | cut -d'"' -f4)
echo "  best.safetensors: lt.best_score ${BEST_SCORE:-?}; highest val_acc in metrics.csv ${MAX_VAL:-?}"
check "best.safetensors holds the highest val_acc" \
    awk -v a="${BEST_SCORE:-0}" -v b="${MAX_VAL:--1}" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'
# last.safetensors carries the same best score (a resume from it must know the best so far)
LAST_BEST=$(head -c 4096 "$ROOT/checkpoints/last.safetensors" 2>/dev/null | grep -ao '"lt.best_score":"[^"]*"' | cut -d'"' -f4)
check "last.safetensors carries the best score so far (${LAST_BEST:-?})" [ "${LAST_BEST:-x}" = "${BEST_SCORE:-y}" ]
it_finish
