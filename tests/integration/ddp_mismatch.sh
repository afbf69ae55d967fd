#!/bin/bash
# Ranks that disagree on a collective get an error naming both, not a hang.
# The mismatch_probe module (tests/integration/mismatch_probe.c) logs
# different sync_dist metrics on rank 1 than on rank 0 in validation:
#   extra       rank 1 logs one metric more: the metric reductions differ in size
#   only_rank1  only rank 1 reduces metrics; rank 0 goes on to the next
#               epoch's gradient all-reduce
# ltrun must exit non-zero well before strategy.timeout_s (20 s), and the
# error must say "disagree" and name rank 0 and rank 1. Two nodes whose
# configs differ (model.hidden) are told so.
source "$(dirname "$0")/common.sh"
it_init ddp_mismatch "$@"
[ -e "$IT_PLUGINS/liblt-module-mismatch_probe.so" ] ||
    { echo "ddp_mismatch: FAIL: no mismatch_probe plugin in $IT_PLUGINS"; exit 1; }

probe() { # probe MODE EPOCHS
    echo "ddp_mismatch: model.mode=$1, $2 epoch(s)"
    local t0=$(now_ms)
    run_ltrun $1 --plugin-dir "$IT_PLUGINS" --plugin-dir "$PLUGINS" --model mismatch_probe \
        --set model.mode=$1 --strategy ddp --devices 2 --batch-size 32 --max-epochs $2 \
        --set trainer.limit_train_batches=5 --set trainer.limit_val_batches=3 \
        --set trainer.num_sanity_val_steps=0 --no-test --set trainer.enable_progress_bar=false \
        --set strategy.timeout_s=20 --set launcher.rdzv_timeout_s=30 --default-root-dir "$IT_TMP/$1"
    local took=$(( $(now_ms) - t0 )) err
    err="$IT_TMP/$1.err"
    echo "  ltrun exited with $RC after $took ms"
    check "$1: ltrun exit status is non-zero ($RC)" [ "$RC" -ne 0 ]
    check "$1: it did not wait for strategy.timeout_s (took $took ms < 20000)" [ "$took" -lt 20000 ]
    check "$1: the error says the ranks disagree" contains "$err" "disagree"
    check "$1: the error names rank 0" contains "$err" "disagree.*rank 0"
    check "$1: the error names rank 1" contains "$err" "disagree.*rank 1"
    check "$1: ltrun says which rank failed" contains "$err" "^ltrun: \(error: \)\?rank [01] (host"
}

probe extra 1
probe only_rank1 2

echo "ddp_mismatch: model.mode=collectives: the module's collectives give the right values"
for strat in "ddp --devices 2" "single_device --devices 1"; do
    label=collectives-${strat%% *}
    run_ltrun "$label" --plugin-dir "$IT_PLUGINS" --plugin-dir "$PLUGINS" --model mismatch_probe \
        --set model.mode=collectives --strategy $strat --batch-size 32 --max-epochs 1 \
        --set trainer.limit_train_batches=3 --set trainer.limit_val_batches=3 \
        --set trainer.num_sanity_val_steps=0 --no-test --set trainer.enable_progress_bar=false \
        --set strategy.timeout_s=20 --default-root-dir "$IT_TMP/$label"
    check "$label: all_gather, reduce, broadcast, barrier, rank checks pass (exit 0)" [ "$RC" -eq 0 ]
    [ "$RC" -eq 0 ] || show_tail "$IT_TMP/$label.err"
done
# Two nodes started with different configs (model.hidden on node 1): the
# first broadcast of the parameters differs in size, and the error says the
# configs differ instead of blaming the collective calls.
echo "ddp_mismatch: two nodes with different model.hidden"
P=$("$TCP_PORT" free)
NODE=(--strategy ddp --devices 1 --max-epochs 1 --set trainer.limit_train_batches=3 --no-test
      --num-nodes 2 --master-port "$P" --set strategy.process_group_backend=gloo)
"$LTRUN" "${BASE[@]}" "${NODE[@]}" --node-rank 0 --default-root-dir "$IT_TMP/cfg0" \
    >"$IT_TMP/cfg0.out" 2>"$IT_TMP/cfg0.err" &
N0=$!
IT_PIDS+=($N0)
run_ltrun cfg1 "${BASE[@]}" "${NODE[@]}" --node-rank 1 --set model.hidden=256 --default-root-dir "$IT_TMP/cfg1"
wait $N0
RC0=$?
check "configs: both nodes refuse (exit 2: $RC0, $RC)" [ "$RC0" -eq 2 -a "$RC" -eq 2 ]
for n in 0 1; do
    check "configs: node $n says the ranks' models or configs differ" \
        contains "$IT_TMP/cfg$n.err" "disagree on collective #[0-9]* .*broadcast.*the ranks' models or configs differ"
done
it_finish
