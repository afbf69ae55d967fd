#!/bin/bash
# (f) A dead rank ends a GPU job quickly and loudly. While a 2-rank ddp job
# trains, rank 1's worker gets SIGKILL; the whole job must be gone within
# 5 s, non-zero, with ltrun's message naming rank 1 and signal 9, and no
# worker left behind (a worker waiting in a collective on the device must
# not hang the job).
#   2 GPUs or more: ddp over nccl, one GPU per rank, one ltrun
#     (--devices 2 --set strategy.process_group_backend=nccl);
#   1 GPU: ddp over gloo, both ranks on GPU 0 (staged through host memory),
#     two ltruns as two nodes on loopback; rank 1's ltrun must name the rank
#     and the signal, rank 0's must end too, naming rank 1 as the peer lost.
source "$(dirname "$0")/lib.sh"
gpu_init gpu_kill "$@"
# Long enough never to finish by itself: 200 epochs of the 512-wide MLP.
LONG=(--accelerator "$GPU" --set model.hidden=512 --max-epochs 200 --batch-size 64)
SAME=()

wait_training() { # wait_training ROOT_DIR PID: until ROOT_DIR/lt_logs appears (rank 0 is about to step)
    local i
    for i in $(seq 1 600); do
        [ -d "$1/lt_logs" ] && return 0
        alive "$2" || return 1
        sleep 0.1
    done
    return 1
}

if [ "$NGPU" -ge 2 ]; then
    if [ "$NCCL" = nccl ] && [ ! -e "$PLUGINS/liblt-backend-nccl.so" ]; then
        echo "gpu_kill: FAIL: $PLUGINS/liblt-backend-nccl.so was not built (configure with -DLT_WITH_NCCL=ON)"
        exit 1
    fi
    echo "gpu_kill: $NGPU GPUs: ddp over $NCCL, 2 ranks on 2 GPUs, one ltrun; SIGKILL to rank 1"
    "$LTRUN" "${BASE[@]}" "${LONG[@]}" --strategy ddp --devices 2 --set strategy.process_group_backend="$NCCL" \
        --default-root-dir "$IT_TMP/run" >"$IT_TMP/run.out" 2>"$IT_TMP/run.err" &
    LT=$!
    IT_PIDS+=($LT)
    check "training started (lt_logs appeared)" wait_training "$IT_TMP/run" $LT
    sleep 1.5
    workers=$(children_of $LT)
    IT_PIDS+=($workers)
    check "ltrun runs 2 workers ($workers)" [ "$(echo $workers | wc -w)" -eq 2 ]
    R1=$(worker_with_rank $LT 1)
    check "found rank 1 among the workers (pid ${R1:-none})" [ -n "$R1" ]
    check "ltrun still running before the kill" alive $LT
    [ -n "$R1" ] && kill -9 "$R1"
    wait_exit $LT 15000
    echo "gpu_kill: killed rank 1 (pid ${R1:-none}); ltrun exited with $RC after $MS ms; its stderr ends with:"
    show_tail "$IT_TMP/run.err" 4
    check "ltrun exited within 5 s of the kill ($MS ms)" [ "$RC" -ne -1 -a "$MS" -le 5000 ]
    check "ltrun exit status is non-zero ($RC)" [ "$RC" -gt 0 ]
    check "stderr names rank 1" contains "$IT_TMP/run.err" "rank 1 "
    check "stderr says signal 9" contains "$IT_TMP/run.err" "signal 9"
    check "no worker process is left ($workers)" none_alive $workers
else
    echo "gpu_kill: 1 GPU: ddp over gloo (staged), 2 ranks on GPU 0 as two loopback nodes; SIGKILL to rank 1"
    start_loopback_nodes run "${LONG[@]}" --set strategy.process_group_backend=gloo
    check "training started (node 0's lt_logs appeared)" wait_training "$IT_TMP/run" $N0
    sleep 1.5
    W0=$(children_of $N0) W1=$(children_of $N1)
    IT_PIDS+=($W0 $W1)
    R1=$(worker_with_rank $N1 1)
    check "found rank 1, node 1's worker (pid ${R1:-none})" [ -n "$R1" ]
    check "both ltruns still running before the kill" bash -c "kill -0 $N0 && kill -0 $N1"
    [ -n "$R1" ] && kill -9 "$R1"
    both_end_within 15000 $N0 $N1
    echo "gpu_kill: killed rank 1 (pid ${R1:-none}); both ltruns ended after ${ENDED_MS} ms (-1: not within 15 s);" \
         "node 0 exit ${END_RC[$N0]:-running}, node 1 exit ${END_RC[$N1]:-running}"
    echo "  node 1's stderr ends with:"; show_tail "$IT_TMP/run-n1.err" 3
    echo "  node 0's stderr ends with:"; show_tail "$IT_TMP/run-n0.err" 3
    check "the job (both ltruns) ended within 5 s of the kill (${ENDED_MS} ms)" [ "$ENDED_MS" -ne -1 -a "$ENDED_MS" -le 5000 ]
    check "node 1's exit status is non-zero (${END_RC[$N1]:-running})" [ "${END_RC[$N1]:-0}" -gt 0 ]
    check "node 0's exit status is non-zero (${END_RC[$N0]:-running})" [ "${END_RC[$N0]:-0}" -gt 0 ]
    check "node 1's ltrun names rank 1" contains "$IT_TMP/run-n1.err" "rank 1 "
    check "node 1's ltrun says signal 9" contains "$IT_TMP/run-n1.err" "signal 9"
    check "node 0's ltrun names rank 1, the peer it lost" contains "$IT_TMP/run-n0.err" "rank 1"
    check "no worker process is left ($W0 $W1)" none_alive $W0 $W1
fi
it_finish
