#!/bin/bash
# Pre-emption under SLURM (Lightning's auto_requeue): two srun-style tasks
# (ddp) get SIGUSR1, as sbatch --signal=USR1@90 sends it. They agree on a
# step, rank 0 saves last.safetensors there and runs the requeue command
# (scontrol requeue "$SLURM_JOB_ID"; a stand-in on PATH records the call),
# and both end with status 0 and no test stage. The same command with
# --ckpt-path last then resumes from that step and finishes.
source "$(dirname "$0")/common.sh"
it_init preempt "$@"
FAKE="$IT_TMP/bin"
mkdir -p "$FAKE"
printf '#!/bin/sh\necho "$@" >>"%s/calls"\n' "$IT_TMP" >"$FAKE/scontrol"
chmod +x "$FAKE/scontrol"
PORT=$("$TCP_PORT" free)
SL="PATH=$FAKE:$PATH SLURM_NTASKS=2 SLURM_NNODES=1 SLURM_NODEID=0 SLURM_JOB_NAME=lt SLURM_NODELIST=127.0.0.1 SLURM_JOB_ID=4242 MASTER_PORT=$PORT"
RUN=(--strategy ddp --devices 2 --seed 1 --set model.hidden=256 --set trainer.limit_train_batches=1500
     --max-epochs 3 --ckpt-path last --default-root-dir "$IT_TMP/run")

start_pair() { # start_pair LABEL: both tasks in the background -> P0 P1
    local r
    for r in 0 1; do
        env $SL SLURM_PROCID=$r SLURM_LOCALID=$r "$LTRUN" "${BASE[@]}" "${RUN[@]}" \
            >"$IT_TMP/$1.$r.out" 2>"$IT_TMP/$1.$r.err" &
        eval P$r=$!
    done
    IT_PIDS+=($P0 $P1)
}

echo "preempt: SIGUSR1 to both tasks while they train"
start_pair first
for i in $(seq 1 300); do [ -d "$IT_TMP/run/lt_logs" ] && break; sleep 0.1; done
sleep 1
kill -USR1 $P0 $P1
wait_exit $P0 20000; RC0=$RC
wait_exit $P1 20000; RC1=$RC
show_tail "$IT_TMP/first.0.out" 2
check "both tasks end with status 0 ($RC0, $RC1)" [ "$RC0" -eq 0 -a "$RC1" -eq 0 ]
check "rank 0 says it saved and requeued" grep -q "pre-empted (User defined signal 1): saved .*last.safetensors at step [0-9]*; requeued with" "$IT_TMP/first.0.out"
check "the requeue command ran once, for job 4242" [ "$(cat "$IT_TMP/calls" 2>/dev/null)" = "requeue 4242" ]
check "last.safetensors was written" [ -s "$IT_TMP/run/checkpoints/last.safetensors" ]
check "no test stage after a pre-emption" bash -c "! grep -q 'test results' '$IT_TMP/first.0.out'"
STEP=$(sed -n 's/.*saved .*at step \([0-9]*\);.*/\1/p' "$IT_TMP/first.0.out")

echo "preempt: the requeued job, same command, resumes from step ${STEP:-?}"
start_pair second
wait_exit $P0 120000; RC0=$RC
wait_exit $P1 120000; RC1=$RC
show_tail "$IT_TMP/second.0.err" 2
check "the resumed tasks end with status 0 ($RC0, $RC1)" [ "$RC0" -eq 0 -a "$RC1" -eq 0 ]
check "it resumed at step ${STEP:-?}" grep -q "resumed from .*step ${STEP:-x})" "$IT_TMP/second.0.out" "$IT_TMP/second.0.err"
check "it finished the 3 epochs" grep -q "epoch 2 done" "$IT_TMP/second.0.out"
it_finish
