#!/bin/bash
# A slow network made on this machine (scripts/slow_link.sh through
# netns_pair): two network namespaces joined by a veth pair whose ends are
# each limited by a tbf qdisc.
#   a. bulk TCP goodput NS1 -> NS0 and NS0 -> NS1 is within 25% of the
#      nominal rate at 200mbit and at 1gbit (about 95.6% of it: tbf counts
#      the headers), and the unshaped pair (none) is more than twice as fast
#      as the 1gbit link;
#   b. ddp on 2 nodes x 1 process (as two_nodes.sh runs it; MLP 784-512-512-10,
#      batch 64, 30 steps): over 200mbit each step takes at least 80% of the
#      time the link needs for its gradients (2.7 MB of float32 each way per
#      step, about 0.11 s), and the unshaped link gives more than twice the
#      samples/s; 1gbit is shown beside them.
# Needs root, tc and the kernel's tbf qdisc (skipped without them), python3.
source "$(dirname "$0")/common.sh"
it_init slow_link "$@"
command -v python3 >/dev/null || it_skip "no python3 (it measures the goodput)"
netns_pair 10.234.0 200mbit || it_skip "$NETNS_WHY"
echo "slow_link: node 0 in netns $NS0 ($ADDR), node 1 in netns $NS1 ($SL_ADDR1)"
PORT=29540

# Floating-point comparison: fcmp A OP B (OP: < <= > >=), or fcmp A @ "LO HI"
# (LO <= A <= HI).
fcmp() {
    if [ "$2" = @ ]; then awk -v a="$1" -v r="$3" 'BEGIN { split(r, b, " "); exit !(a >= b[1] && a <= b[2]) }'
    else awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; fi
}

goodput() { # goodput RATE NOMINAL_MBIT: sets UP_<RATE>, DOWN_<RATE>
    local rate=$1 nom=$2 up down
    up=$(slow_link_measure "$NS1" "$NS0" "$ADDR" 2) || up=0
    [ "$up" = 0 ] && echo "  $SLOW_LINK_ERR"
    down=$(slow_link_measure "$NS0" "$NS1" "$SL_ADDR1" 2) || down=0
    [ "$down" = 0 ] && echo "  $SLOW_LINK_ERR"
    echo "  $rate: NS1 -> NS0 $up Mbit/s, NS0 -> NS1 $down Mbit/s (TCP payload)"
    printf -v "UP_$rate" %s "$up"
    printf -v "DOWN_$rate" %s "$down"
    if [ "$nom" != - ]; then
        local lo=$((nom * 3 / 4)) hi=$((nom * 5 / 4))
        check "$rate: NS1 -> NS0 within 25% of $nom Mbit/s ($up)" fcmp "$up" "@" "$lo $hi"
        check "$rate: NS0 -> NS1 within 25% of $nom Mbit/s ($down)" fcmp "$down" "@" "$lo $hi"
    fi
}

# ddp over the link as it is now; sets SPS (samples/s of both ranks, node 0's
# epoch line) and STEP_MS (2 x 64 samples a step).
STEPS=30
ddp() { # ddp LABEL
    local label=$1 n rc0 rc1
    PORT=$((PORT + 1))
    local NODES=(--strategy ddp --num-nodes 2 --devices 1 --master-addr $ADDR --master-port $PORT
                 --batch-size 64 --set model.hidden=512 --seed 1 --max-steps $STEPS
                 --set trainer.limit_val_batches=0 --set launcher.rdzv_timeout_s=30)
    "${IN0[@]}" "$LTRUN" "${BASE[@]}" "${NODES[@]}" --node-rank 0 --default-root-dir "$IT_TMP/$label-n0" \
        >"$IT_TMP/$label-n0.out" 2>"$IT_TMP/$label-n0.err" &
    local n0=$!
    "${IN1[@]}" "$LTRUN" "${BASE[@]}" "${NODES[@]}" --node-rank 1 --default-root-dir "$IT_TMP/$label-n1" \
        >"$IT_TMP/$label-n1.out" 2>"$IT_TMP/$label-n1.err" &
    local n1=$!
    IT_PIDS+=($n0 $n1)
    wait $n0; rc0=$?
    wait $n1; rc1=$?
    for n in 0 1; do
        local rc=$rc0; [ $n = 1 ] && rc=$rc1
        [ $rc -ne 0 ] && { echo "  node $n exited $rc:"; show_tail "$IT_TMP/$label-n$n.err" 6; }
        check "$label: node $n exits 0" [ $rc -eq 0 ]
    done
    local line
    line=$(grep -m 1 "epoch 0 done: step $STEPS," "$IT_TMP/$label-n0.out")
    SPS=$(sed -n 's/.* \([0-9.]*\) samples\/s.*/\1/p' <<<"$line")
    local secs
    secs=$(sed -n 's/.*step [0-9]*, \([0-9.]*\) s,.*/\1/p' <<<"$line")
    check "$label: node 0 printed its epoch line" [ -n "$SPS" -a -n "$secs" ]
    SPS=${SPS:-0} secs=${secs:-0}
    # from samples/s (printed to the sample, where the seconds have one decimal)
    STEP_MS=$(awk -v r="$SPS" 'BEGIN { printf "%.1f", (r > 0 ? 2 * 64 * 1000 / r : 0) }')
    echo "  $label: $SPS samples/s, $STEP_MS ms per step ($secs s for $STEPS steps)"
}

echo "slow_link: a. bulk TCP goodput each way"
goodput 200mbit 200
slow_link_rate 1gbit || { echo "  $SLOW_LINK_ERR"; check "set 1gbit" false; }
goodput 1gbit 1000
slow_link_rate none || { echo "  $SLOW_LINK_ERR"; check "remove the limit" false; }
goodput none -
check "none is more than twice as fast as 1gbit NS1 -> NS0 ($UP_none vs $UP_1gbit)" \
    fcmp "$UP_none" ">" "$(awk -v x="$UP_1gbit" 'BEGIN { print 2 * x }')"
check "none is more than twice as fast as 1gbit NS0 -> NS1 ($DOWN_none vs $DOWN_1gbit)" \
    fcmp "$DOWN_none" ">" "$(awk -v x="$DOWN_1gbit" 'BEGIN { print 2 * x }')"

echo "slow_link: b. ddp, 2 nodes x 1 process, MLP 784-512-512-10, batch 64, $STEPS steps"
# float32 gradients, each way per step: 2 ranks' allreduce moves all of them
GRAD_BYTES=$(( (784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10) * 4 ))
WANT_MS=$((GRAD_BYTES * 8 / 200000)) # at 200 Mbit/s
echo "  $GRAD_BYTES bytes of gradients each way per step: $WANT_MS ms at 200 Mbit/s"
slow_link_rate 200mbit
ddp ddp-200mbit
SPS_200=$SPS MS_200=$STEP_MS
slow_link_rate 1gbit
ddp ddp-1gbit
slow_link_rate none
ddp ddp-none
SPS_NONE=$SPS
check "200mbit: a step takes at least 80% of the gradients' time on the link ($MS_200 >= 0.8 x $WANT_MS ms)" \
    fcmp "$MS_200" ">=" "$((WANT_MS * 8 / 10))"
check "unshaped gives more than twice the samples/s of 200mbit ($SPS_NONE vs $SPS_200)" \
    fcmp "$SPS_NONE" ">" "$(awk -v s="$SPS_200" 'BEGIN { print 2 * s }')"
it_finish
