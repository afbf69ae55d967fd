#!/bin/bash
# Rendezvous errors are one clear line and a non-zero exit, never a hang:
#   1. a node whose LT_RDZV_TOKEN differs from node 0's (found by its workers,
#      and, without a seed to fetch, by its launcher)
#   2. --master-port already in use (by another program, and by another ltrun)
#   3. a node > 0 whose master is unreachable (launcher.rdzv_timeout_s = 3)
# Along the way: SIGTERM to a waiting ltrun stops it and its workers (exit 143).
source "$(dirname "$0")/common.sh"
it_init store_errors "$@"
ONE=(--plugin-dir "$PLUGINS" --config "$SRC/examples/fashion_mnist/train.ini" --set model.hidden=64
     --set trainer.limit_train_batches=5 --set trainer.limit_val_batches=2 --max-epochs 1
     --set trainer.num_sanity_val_steps=0 --no-test --set trainer.enable_progress_bar=false
     --strategy ddp --set strategy.timeout_s=10)
free_port() { "$TCP_PORT" free; }

echo "store_errors: 1a. node 1's workers present the wrong token"
P=$(free_port)
TWO=(--num-nodes 2 --devices 1 --master-addr 127.0.0.1 --master-port $P --set launcher.rdzv_timeout_s=5)
LT_RDZV_TOKEN=right-token "$LTRUN" "${ONE[@]}" "${TWO[@]}" --node-rank 0 --seed 3 \
    --default-root-dir "$IT_TMP/t0" >"$IT_TMP/t0.out" 2>"$IT_TMP/t0.err" &
N0=$!; IT_PIDS+=($N0)
sleep 0.5
LT_RDZV_TOKEN=wrong-token "$LTRUN" "${ONE[@]}" "${TWO[@]}" --node-rank 1 --seed 3 \
    --default-root-dir "$IT_TMP/t1" >"$IT_TMP/t1.out" 2>"$IT_TMP/t1.err" &
N1=$!; IT_PIDS+=($N1)
wait_exit $N1 20000
echo "  node 1 exited with $RC after $MS ms:"; show_tail "$IT_TMP/t1.err" 3
check "node 1 exits non-zero" [ "$RC" -gt 0 ]
check "node 1 says the store refused its token" contains "$IT_TMP/t1.err" "refused the token"
check "node 1 says LT_RDZV_TOKEN is the fix" contains "$IT_TMP/t1.err" "LT_RDZV_TOKEN"
check "node 1 names the failed rank" contains "$IT_TMP/t1.err" "^ltrun: \(error: \)\?rank 1 (host"
wait_exit $N0 20000
echo "  node 0 exited with $RC after a further $MS ms:"; show_tail "$IT_TMP/t0.err" 2
check "node 0 gives up too, non-zero" [ "$RC" -gt 0 ]

echo "store_errors: 1b. node 1's launcher itself presents the wrong token (it fetches the seed)"
P=$(free_port)
TWO=(--num-nodes 2 --devices 1 --master-addr 127.0.0.1 --master-port $P --set launcher.rdzv_timeout_s=5)
LT_RDZV_TOKEN=right-token "$LTRUN" "${ONE[@]}" "${TWO[@]}" --node-rank 0 --set trainer.seed= \
    --default-root-dir "$IT_TMP/u0" >"$IT_TMP/u0.out" 2>"$IT_TMP/u0.err" &
N0=$!; IT_PIDS+=($N0)
sleep 0.5
t0=$(now_ms)
LT_RDZV_TOKEN=wrong-token run_ltrun u1 "${ONE[@]}" "${TWO[@]}" --node-rank 1 --set trainer.seed= \
    --default-root-dir "$IT_TMP/u1"
check "node 1's launcher exits 1" [ "$RC" -eq 1 ]
check "node 1's launcher says the store refused its token" contains "$IT_TMP/u1.err" "^ltrun: error: node 1: .*refused the token"
check "node 1 started no worker" bash -c "! grep -q 'starting 1 worker' '$IT_TMP/u1.out'"
wait_exit $N0 20000
check "node 0 gives up too, non-zero ($RC)" [ "$RC" -gt 0 ]
check "node 0 names rank 1 as never joined, and the key that sets the wait" contains "$IT_TMP/u0.err" \
    "rank 1 never joined (timed out after 5 s .*launcher\.rdzv_timeout_s"

echo "store_errors: 2a. --master-port held by another program"
"$TCP_PORT" hold 0 >"$IT_TMP/hold.out" &
H=$!; IT_PIDS+=($H)
for i in $(seq 50); do [ -s "$IT_TMP/hold.out" ] && break; sleep 0.1; done
P=$(cat "$IT_TMP/hold.out")
run_ltrun busy "${ONE[@]}" --devices 2 --master-port $P --default-root-dir "$IT_TMP/busy"
echo "  stderr:"; show_tail "$IT_TMP/busy.err" 2
check "ltrun exits 1" [ "$RC" -eq 1 ]
check "the error names port $P and says it is in use" contains "$IT_TMP/busy.err" "port $P .*already in use"
check "the error is one line" [ $(wc -l <"$IT_TMP/busy.err") -eq 1 ]
check "no worker was started" bash -c "! grep -q 'starting 2 workers' '$IT_TMP/busy.out'"
kill $H 2>/dev/null

echo "store_errors: 2b. --master-port held by another ltrun (node 0 of a job waiting for node 1)"
P=$(free_port)
"$LTRUN" "${ONE[@]}" --num-nodes 2 --node-rank 0 --devices 1 --master-port $P --seed 1 \
    --set launcher.rdzv_timeout_s=60 --default-root-dir "$IT_TMP/first" \
    >"$IT_TMP/first.out" 2>"$IT_TMP/first.err" &
FIRST=$!; IT_PIDS+=($FIRST)
for i in $(seq 100); do [ -n "$(children_of $FIRST)" ] && break; sleep 0.1; done
FW=$(children_of $FIRST)
run_ltrun second "${ONE[@]}" --num-nodes 2 --node-rank 0 --devices 1 --master-port $P --seed 1 \
    --default-root-dir "$IT_TMP/second"
echo "  stderr:"; show_tail "$IT_TMP/second.err" 2
check "the second ltrun exits 1" [ "$RC" -eq 1 ]
check "its error names port $P and says it is in use" contains "$IT_TMP/second.err" "port $P .*already in use"
check "the first ltrun is still running, with its worker ($FW)" bash -c "kill -0 $FIRST && [ -n '$FW' ]"
kill -TERM $FIRST
wait_exit $FIRST 10000
echo "  the first ltrun, sent SIGTERM, exited with $RC after $MS ms"
check "SIGTERM: ltrun exits 143 within 5 s" [ "$RC" -eq 143 -a "$MS" -le 5000 ]
check "SIGTERM: ltrun says it passed the signal on" contains "$IT_TMP/first.err" "got SIGTERM"
check "SIGTERM: no worker left ($FW)" none_alive $FW

echo "store_errors: 3. node 1 with an unreachable master (launcher.rdzv_timeout_s=3)"
P=$(free_port)  # free now, so nothing answers there
for how in workers launcher; do
    seed=(--seed 5); [ $how = launcher ] && seed=(--set trainer.seed=)
    t0=$(now_ms)
    run_ltrun unreach-$how "${ONE[@]}" --num-nodes 2 --node-rank 1 --devices 1 --master-addr 127.0.0.1 \
        --master-port $P "${seed[@]}" --set launcher.rdzv_timeout_s=3 --default-root-dir "$IT_TMP/unreach"
    took=$(( $(now_ms) - t0 ))
    echo "  ($how find out) ltrun exited with $RC after $took ms"
    check "$how: non-zero exit" [ "$RC" -ne 0 ]
    check "$how: within the timeout plus 5 s (took $took ms)" [ "$took" -lt 8000 ]
    check "$how: says the store could not be reached, naming it" \
        contains "$IT_TMP/unreach-$how.err" "could not reach the rendezvous store at 127.0.0.1:$P within 3 s"
done
check "workers: ltrun names the failed rank" contains "$IT_TMP/unreach-workers.err" "^ltrun: \(error: \)\?rank 1 (host.*\(during setup\|before its first step\)"
it_finish
