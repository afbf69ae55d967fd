#!/bin/bash
# A stuck rank is named: SIGSTOP one rank of a 2-rank ddp job with
# launcher.stall_timeout_s = 3. The other rank, waiting in the next
# collective for 3 s while the stopped one never joins it, names it, posts
# it as the job's failure and ends; ltrun's one line quotes it naming the
# stopped rank ("rank N made no progress"), for rank 0 stopped as for rank 1,
# long before strategy.timeout_s (60 s here).
source "$(dirname "$0")/common.sh"
it_init stall "$@"
for stopped in 0 1; do
    echo "stall: SIGSTOP rank $stopped"
    other=$((1 - stopped))
    "$LTRUN" "${BASE[@]}" --strategy ddp --devices 2 --set model.hidden=256 --set launcher.stall_timeout_s=3 \
        --set trainer.limit_train_batches=2000 --max-epochs 20 --default-root-dir "$IT_TMP/run$stopped" \
        >"$IT_TMP/run$stopped.out" 2>"$IT_TMP/run$stopped.err" &
    LT=$!
    IT_PIDS+=($LT)
    for i in $(seq 1 300); do [ -d "$IT_TMP/run$stopped/lt_logs" ] && break; sleep 0.1; done
    sleep 1
    W=$(worker_with_rank $LT $stopped)
    check "rank $stopped found (pid ${W:-none}) while training" [ -n "$W" ]
    IT_PIDS+=($(children_of $LT))
    [ -n "$W" ] && kill -STOP $W
    wait_exit $LT 20000
    echo "  ltrun ended $MS ms after the stop, status $RC"
    show_tail "$IT_TMP/run$stopped.err" 3
    check "ltrun ended within 20 s ($MS ms), not at the 60 s collective timeout" [ "$RC" -ne -1 ]
    check "its exit status is 1 ($RC)" [ "$RC" -eq 1 ]
    check "the last line names rank $stopped as stuck (rank $other's words)" \
        bash -c "tail -n 1 '$IT_TMP/run$stopped.err' | grep -q '^ltrun: error: rank $other (host .*rank $stopped made no progress'"
    check "which is said once" [ "$(grep -c 'made no progress' "$IT_TMP/run$stopped.err")" -eq 1 ]
    check "rank $other's own error names rank $stopped" grep -q "error:.*rank $stopped made no progress" "$IT_TMP/run$stopped.err"
    [ -n "$W" ] && kill -9 $W 2>/dev/null
done
it_finish
