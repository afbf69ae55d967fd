#!/bin/bash
# --max-restarts: kill -9 rank 1 in the second epoch of a 2-epoch ddp run;
# ltrun must stop the group, restart it from this run's
# checkpoints/last.safetensors (LT_RESTART_COUNT=1), finish with exit 0, and
# the finished model must equal an uninterrupted run's (resume is bit-exact:
# tolerance 0).
source "$(dirname "$0")/common.sh"
it_init ddp_restart "$@"
RUN=(--strategy ddp --devices 2 --seed 1 --set model.hidden=256 --set trainer.limit_train_batches=300
     --max-epochs 2)

echo "ddp_restart: the uninterrupted reference"
run_ltrun ref "${BASE[@]}" "${RUN[@]}" --default-root-dir "$IT_TMP/ref"
check "reference exits 0" [ "$RC" -eq 0 ]

echo "ddp_restart: the same run, rank 1 killed in epoch 2, --max-restarts 1"
"$LTRUN" "${BASE[@]}" "${RUN[@]}" --max-restarts 1 --default-root-dir "$IT_TMP/run" \
    >"$IT_TMP/run.out" 2>"$IT_TMP/run.err" &
LT=$!
IT_PIDS+=($LT)
CK="$IT_TMP/run/checkpoints/last.safetensors"
for i in $(seq 1200); do [ -e "$CK" ] && break; alive $LT || break; sleep 0.025; done
R1=$(worker_with_rank $LT 1)
check "epoch 1's checkpoint appeared while rank 1 (${R1:-none}) runs" [ -e "$CK" -a -n "$R1" ]
[ -n "$R1" ] && kill -9 $R1
echo "ddp_restart: killed rank 1 (pid ${R1:-none})"
IT_PIDS+=($(children_of $LT))
wait $LT
RC=$?
echo "  ltrun exited with $RC; its stderr:"; show_tail "$IT_TMP/run.err" 4
check "ltrun exits 0 after the restart" [ "$RC" -eq 0 ]
check "it reported rank 1 killed by signal 9" contains "$IT_TMP/run.err" "rank 1 (host.*signal 9"
check "it restarted from this run's last checkpoint" contains "$IT_TMP/run.err" "restart 1 of 1, LT_RESTART_COUNT=1), resuming from .*last.safetensors"
check "epoch 2 was finished by the restarted group" contains "$IT_TMP/run.out" "epoch 1 done"
ckpt_equal "$CK" "$IT_TMP/ref/checkpoints/last.safetensors" 0 both "the restarted run's parameters equal the reference's exactly"
it_finish
