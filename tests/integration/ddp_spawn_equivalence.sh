#!/bin/bash
# ddp_spawn (the trainer forks its workers) must train exactly what ddp
# (ltrun starts them) trains: 2 ranks x batch 32, 20 steps, same seed;
# parameters within a relative difference of 1e-5, elementwise and in norm.
# Then a fit and test under ddp_spawn: one log version for the whole run.
source "$(dirname "$0")/common.sh"
it_init ddp_spawn_equivalence "$@"
TOL=1e-5
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1 --devices 2 --batch-size 32 --max-steps 20)
[ -e "$PLUGINS/liblt-strategy-ddp_spawn.so" ] || { echo "ddp_spawn_equivalence: FAIL: no ddp_spawn plugin in $PLUGINS"; exit 1; }
for s in ddp ddp_spawn; do
    run_ltrun $s "${BASE[@]}" "${SAME[@]}" --strategy $s --default-root-dir "$IT_TMP/$s"
    check "$s: ltrun exits 0" [ "$RC" -eq 0 ]
    check "$s: wrote checkpoints/last.safetensors" [ -s "$IT_TMP/$s/checkpoints/last.safetensors" ]
done
check "ddp ran under the launcher (ddp_spawn did not)" bash -c \
    "grep -q 'starting 2 workers' '$IT_TMP/ddp.out' && ! grep -q 'starting 2 workers' '$IT_TMP/ddp_spawn.out'"
ckpt_equal "$IT_TMP/ddp_spawn/checkpoints/last.safetensors" "$IT_TMP/ddp/checkpoints/last.safetensors" $TOL both \
    "ddp_spawn equals ddp"

# ddp_spawn's launching process tests after its workers fit: the test metrics
# must go into the fit's own version directory at the fit's last step, as
# under ddp (they went into a second version_N, on a row at step 0).
FIT_TEST=()
for a in "${BASE[@]}"; do [ "$a" = --no-test ] || FIT_TEST+=("$a"); done
run_ltrun fit_test "${FIT_TEST[@]}" --seed 1 --devices 2 --batch-size 32 --max-epochs 1 \
    --set trainer.limit_train_batches=6 --set trainer.limit_test_batches=2 --strategy ddp_spawn \
    --default-root-dir "$IT_TMP/fit_test"
check "fit+test: ltrun exits 0" [ "$RC" -eq 0 ]
check "fit+test: printed test results" grep -q '^lt: test results:' "$IT_TMP/fit_test.out"
mapfile -t VERSIONS < <(find "$IT_TMP/fit_test" -type d -name 'version_*')
check "fit+test: exactly one version directory (${#VERSIONS[@]}: ${VERSIONS[*]})" \
    [ "${#VERSIONS[@]}" -eq 1 ]
check "fit+test: 'logging to' said once" \
    [ "$(grep -c '^lt: logging to' "$IT_TMP/fit_test.out")" -eq 1 ]
CSV="${VERSIONS[0]:-none}/metrics.csv"
# One row with test_loss, at the step of the last row with train_loss (6).
check "fit+test: metrics.csv has the test metrics at the fit's last step" awk -F, '
    NR == 1 {
        for (i = 1; i <= NF; i++) { if ($i == "train_loss") f = i; if ($i == "test_loss") t = i }
        next
    }
    f && $f != "" { last = $2 }
    t && $t != "" { tests++; step = $2 }
    END { exit !(f && t && tests == 1 && last == 6 && step == last) }' "$CSV"
[ "$IT_FAILS" -eq 0 ] || show_tail "$CSV" 10
it_finish
