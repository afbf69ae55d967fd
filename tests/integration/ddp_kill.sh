#!/bin/bash
# A rank that dies takes the group down quickly and loudly: kill -9 rank 1 of
# a running 2-rank ddp job; ltrun must exit non-zero within 5 s, say which
# rank died and how ("rank 1", "signal 9"), and leave no worker behind.
source "$(dirname "$0")/common.sh"
it_init ddp_kill "$@"
# Long enough never to finish by itself (~10 s per epoch on 2 cores).
"$LTRUN" "${BASE[@]}" --strategy ddp --devices 2 --set model.hidden=512 \
    --set trainer.limit_train_batches=2000 --max-epochs 20 --default-root-dir "$IT_TMP/run" \
    >"$IT_TMP/run.out" 2>"$IT_TMP/run.err" &
LT=$!
IT_PIDS+=($LT)
echo "ddp_kill: ltrun pid $LT"
# Wait for both workers, then for training to be under way.
workers=""
for i in $(seq 1 300); do
    workers=$(children_of $LT)
    [ $(echo $workers | wc -w) -eq 2 ] && break
    alive $LT || break
    sleep 0.1
done
IT_PIDS+=($workers)
check "ltrun started 2 workers ($workers)" [ $(echo $workers | wc -w) -eq 2 ]
# Rank 0 makes the log directory just before the first step (stdout, a
# file here, is block-buffered, so its lines come late).
for i in $(seq 1 300); do
    [ -d "$IT_TMP/run/lt_logs" ] && break
    sleep 0.1
done
check "training started (lt_logs appeared)" [ -d "$IT_TMP/run/lt_logs" ]
sleep 1.5
R1=$(worker_with_rank $LT 1)
check "found rank 1 among the workers (pid ${R1:-none})" [ -n "$R1" ]
check "ltrun still running before the kill" alive $LT
[ -n "$R1" ] && kill -9 "$R1"
wait_exit $LT 15000
echo "ddp_kill: killed rank 1 (pid ${R1:-none}) with SIGKILL"
echo "ddp_kill: ltrun exited with $RC after $MS ms; its stderr ends with:"
show_tail "$IT_TMP/run.err" 4
check "ltrun exited within 5 s of the kill ($MS ms)" [ "$RC" -ne -1 -a "$MS" -le 5000 ]
check "ltrun exit status is non-zero ($RC)" [ "$RC" -gt 0 ]
check "stderr names rank 1" contains "$IT_TMP/run.err" "rank 1 "
check "stderr says signal 9" contains "$IT_TMP/run.err" "signal 9"
check "stderr says where it was (step/epoch)" contains "$IT_TMP/run.err" "at step [0-9]* (epoch [0-9]*)"
check "no worker process is left ($workers)" none_alive $workers
it_finish
