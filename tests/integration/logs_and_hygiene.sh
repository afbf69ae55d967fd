#!/bin/bash
# What a run leaves behind when it ends badly, and what it refuses up front:
#   1. metrics.csv is flushed every trainer.flush_logs_every_n_steps steps:
#      a run flushed every 100 steps reads the same as one flushed only at
#      epoch ends (val_* columns appear after the first flush; the last step
#      of an epoch gains the validation cells); no line twice
#   2. a run killed with SIGKILL mid-epoch keeps the lines up to its last
#      flush, the same lines an unkilled run writes
#   3. a run that fails with an error keeps everything it logged: here a
#      checkpoint.monitor name the model never logs, found at the first
#      validation's end, with Lightning's message naming the logged metrics
#   4. checkpoint.monitor on a validation metric while the fit never validates
#      is refused before the first step (exit 2, one line naming the key)
#   5. the rendezvous store logs garbage connections a few lines at a time
#      and counts the rest, instead of one line each
#   6. a run given logger.version of a directory that holds a metrics.csv
#      says it replaces it (one warning line, as Lightning's CSVLogger);
#      a run without logger.version takes the next version_N silently
#   7. a full disk (a 64 KiB tmpfs, as root; passed over otherwise) while
#      metrics.csv is rewritten whole: exit 1, one error line naming the
#      file, no metrics.csv.tmp left behind, metrics.csv as the last flush
#      left it (tests/unit/io/test_metrics.c fails writes without root)
source "$(dirname "$0")/common.sh"
it_init logs_and_hygiene "$@"
ONE=("${BASE[@]}" --strategy single_device --devices 1 --set trainer.log_every_n_steps=10)

csv_of() { echo "$IT_TMP/$1/lt_logs/version_0/metrics.csv"; }
# No (epoch, step) twice, and every line has the header's number of fields.
well_formed() {
    awk -F, 'NR == 1 { n = NF; next } NF != n || seen[$1 "," $2]++ { bad = 1 } END { exit bad }' "$1"
}

echo "logs_and_hygiene: 1. flushed every 100 steps vs only at epoch ends (2 epochs of 300 steps)"
TWO=("${ONE[@]}" --max-epochs 2 --set trainer.limit_train_batches=300)
run_ltrun every100 "${TWO[@]}" --default-root-dir "$IT_TMP/every100"
check "the run flushed every 100 steps succeeds" [ "$RC" -eq 0 ]
run_ltrun atend "${TWO[@]}" --set trainer.flush_logs_every_n_steps=1000000 --default-root-dir "$IT_TMP/atend"
check "the run flushed at epoch ends succeeds" [ "$RC" -eq 0 ]
A=$(csv_of every100); Z=$(csv_of atend)
echo "    $(wc -l <"$A") lines; header: $(head -1 "$A"); last: $(tail -1 "$A")"
check "the two metrics.csv are the same" cmp -s "$A" "$Z"
check "the header has the validation columns" [ "$(head -1 "$A")" = "epoch,step,train_loss,val_loss,val_acc" ]
check "60 step lines (every 10 steps)" [ "$(wc -l <"$A")" -eq 61 ]
check "no line twice, all as wide as the header" well_formed "$A"
check "the epoch ends' lines carry the validation cells" \
    bash -c "grep -q '^0,300,[^,]*,[^,]\+,[^,]\+$' '$A' && grep -q '^1,600,[^,]*,[^,]\+,[^,]\+$' '$A'"

echo "logs_and_hygiene: 2. kill -9 mid-epoch after more than 100 steps"
# A wide model and small batches: an epoch takes seconds, the kill comes
# right after the flush at step 200 shows up in the file.
KILL=("${ONE[@]}" --set model.hidden=512 --batch-size 32 --max-epochs 1)
run_ltrun reference "${KILL[@]}" --max-steps 400 --set trainer.flush_logs_every_n_steps=1000000 \
    --default-root-dir "$IT_TMP/reference"
check "the reference run (400 steps) succeeds" [ "$RC" -eq 0 ]
"$LTRUN" "${KILL[@]}" --default-root-dir "$IT_TMP/killed" >"$IT_TMP/killed.out" 2>"$IT_TMP/killed.err" &
LT=$!; IT_PIDS+=($LT)
K=$(csv_of killed)
for i in $(seq 1 600); do
    grep -q '^0,200,' "$K" 2>/dev/null && break
    alive $LT || break
    sleep 0.02
done
kill -9 $LT 2>/dev/null
wait_exit $LT 5000
last=$(tail -1 "$K" 2>/dev/null | cut -d, -f2)
echo "    killed (exit $RC); metrics.csv: $(($(wc -l <"$K" 2>/dev/null || echo 1) - 1)) lines, the last at step ${last:-none}"
check "the run was killed by SIGKILL, not finished (exit $RC)" [ "$RC" -eq 137 ]
check "it was killed mid-epoch (no last.safetensors)" [ ! -e "$IT_TMP/killed/checkpoints/last.safetensors" ]
check "its metrics.csv ends at a flush (a multiple of 100 steps, at least 200: step ${last:-none})" \
    bash -c "[ -n '$last' ] && [ \$(( $last % 100 )) -eq 0 ] && [ $last -ge 200 ]"
check "its lines are the reference run's first ones (same header, same values, none twice)" \
    bash -c "[ \$(wc -l <'$K') -ge 21 ] && cmp -s '$K' <(head -n \$(wc -l <'$K') '$(csv_of reference)')"

echo "logs_and_hygiene: 3. a run failing at the first validation's end keeps its metrics"
run_ltrun failed "${ONE[@]}" --max-epochs 2 --set trainer.limit_train_batches=150 \
    --set checkpoint.monitor=val_accuracy --set trainer.flush_logs_every_n_steps=1000000 \
    --default-root-dir "$IT_TMP/failed"
show_tail "$IT_TMP/failed.err" 1
check "it exits 2" [ "$RC" -eq 2 ]
check "Lightning's message, with the metrics that were logged" contains "$IT_TMP/failed.err" \
    "checkpoint.monitor = 'val_accuracy' (--set) could not find the monitored key in the logged epoch metrics: \[train_loss, val_loss, val_acc\]"
check "it trained one epoch only" bash -c "grep -q 'epoch 0 done' '$IT_TMP/failed.out' && ! grep -q 'epoch 1 done' '$IT_TMP/failed.out'"
F=$(csv_of failed)
check "metrics.csv holds every step line and the validation (never flushed before the failure)" \
    bash -c "[ \$(wc -l <'$F' 2>/dev/null || echo 0) -eq 16 ] && grep -q '^0,150,[^,]*,[^,]\+,[^,]\+$' '$F'"

echo "logs_and_hygiene: 4. checkpoint.monitor=val_acc (train.ini) while the fit never validates"
refused() { # refused LABEL WHY args...
    local label=$1 why=$2; shift 2
    t0=$(now_ms)
    run_ltrun "$label" "${ONE[@]}" "$@" --default-root-dir "$IT_TMP/$label"
    local took=$(( $(now_ms) - t0 ))
    show_tail "$IT_TMP/$label.err" 1
    check "$label: exits 2 ($RC) in $took ms" [ "$RC" -eq 2 ]
    check "$label: one line naming checkpoint.monitor and $why" \
        bash -c "[ \$(wc -l <'$IT_TMP/$label.err') -eq 1 ] && grep -q \"checkpoint.monitor = 'val_acc' (.*train.ini:[0-9]*) is a validation metric, but this fit never validates: .*$why\" '$IT_TMP/$label.err'"
    check "$label: before the first step" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/$label.out'"
}
refused noval "trainer.limit_val_batches = 0 (--set) leaves none" --max-epochs 1 --set trainer.limit_val_batches=0
refused late "trainer.check_val_every_n_epoch = 3 validates first after epoch 3, but trainer.max_epochs = 2" \
    --max-epochs 2 --set trainer.check_val_every_n_epoch=3 --set trainer.limit_train_batches=5
refused nodata "there is no validation data (data.val_split = 0" --max-epochs 1 --set data.val_split=0
run_ltrun short "${ONE[@]}" --max-steps 20 --set trainer.limit_val_batches=0 --default-root-dir "$IT_TMP/short"
check "max_steps ending the run before any epoch's end: it trains (monitor never consulted)" [ "$RC" -eq 0 ]
run_ltrun every2 "${ONE[@]}" --max-epochs 2 --set trainer.check_val_every_n_epoch=2 \
    --set trainer.limit_train_batches=20 --default-root-dir "$IT_TMP/every2"
check "validation every 2nd epoch: epoch 0 waits for it, epoch 1 writes best.safetensors" \
    bash -c "[ $RC -eq 0 ] && [ -e '$IT_TMP/every2/checkpoints/best.safetensors' ]"

echo "logs_and_hygiene: 5. 2000 garbage connections to ltrun's rendezvous store"
P=$("$TCP_PORT" free)
# Node 0 of a 2-node job waits for node 1 with its store up.
"$LTRUN" "${BASE[@]}" --strategy ddp --num-nodes 2 --node-rank 0 --devices 1 --master-port $P --seed 1 \
    --set launcher.rdzv_timeout_s=60 --default-root-dir "$IT_TMP/store" \
    >"$IT_TMP/store.out" 2>"$IT_TMP/store.err" &
LT=$!; IT_PIDS+=($LT)
for i in $(seq 100); do [ -n "$(children_of $LT)" ] && break; sleep 0.1; done
sent=0
t0=$(now_ms)
for i in $(seq 2000); do
    if exec 3<>/dev/tcp/127.0.0.1/$P; then
        sent=$((sent + 1))
        printf 'GET / HTTP/1.0\r\n\r\n' >&3
        exec 3>&-
    fi
done 2>/dev/null
took=$(( $(now_ms) - t0 ))
sleep 1
alive $LT && kill -TERM $LT
wait_exit $LT 10000
logged=$(grep -c 'rendezvous store: dropped connection from' "$IT_TMP/store.err")
counted=$(sed -n 's/.*rendezvous store: \([0-9]*\) more warning(s) about connections.*/\1/p' "$IT_TMP/store.err" |
          awk '{ n += $1 } END { if (NR) print n }')
lines=$(grep -c 'rendezvous store:' "$IT_TMP/store.err")
echo "    $sent sent in $took ms; ltrun exited $RC; store lines: $lines ($logged logged, ${counted:-0} counted)"
grep 'rendezvous store:' "$IT_TMP/store.err" | tail -n 2 | sed 's/^/    /'
check "all 2000 connections were made ($sent)" [ "$sent" -eq 2000 ]
# 5 lines per 10 s, one count line per 10 s: the 2000 came within a few seconds.
check "at most 5 lines of warnings per 10 s ($logged in ~$(( (took + 1999) / 1000 )) s)" \
    [ "$logged" -le $(( 5 * (took / 10000 + 2) )) ]
check "the rest counted in a line or two, none lost (${counted:-0} + $logged >= $sent)" \
    bash -c "[ -n '$counted' ] && [ $(( ${counted:-0} + logged )) -ge $sent ] && [ $lines -le $(( 6 * (took / 10000 + 2) )) ]"

echo "logs_and_hygiene: 6. logger.version naming a logged run"
run_ltrun ver1 "${ONE[@]}" --max-steps 3 --set logger.version=0 --default-root-dir "$IT_TMP/ver"
check "ver1: exits 0 ($RC)" [ "$RC" -eq 0 ]
check "ver1: a fresh version_0, no warning" bash -c "! grep -q 'already holds' '$IT_TMP/ver1.err'"
run_ltrun ver2 "${ONE[@]}" --max-steps 3 --set logger.version=0 --default-root-dir "$IT_TMP/ver"
run_ltrun ver3 "${ONE[@]}" --max-steps 3 --default-root-dir "$IT_TMP/ver"
check "ver2: says it replaces version_0's metrics.csv" \
    contains "$IT_TMP/ver2.err" "logger.version = 0: $IT_TMP/ver/lt_logs/version_0 already holds a metrics.csv, which this run replaces"
check "ver3 (no logger.version): version_1, no warning" \
    bash -c "[ -s '$IT_TMP/ver/lt_logs/version_1/metrics.csv' ] && ! grep -q 'already holds' '$IT_TMP/ver3.err'"

# Flushed every step, metrics.csv is rewritten whole at each epoch's end (the
# last line gains the validation cells): after epoch 0 the file and its
# temporary fit beside config.txt, after epoch 1 they do not.
echo "logs_and_hygiene: 7. a full disk while metrics.csv is written"
TINY=$IT_TMP/tiny
mkdir -p "$TINY"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=64k tmpfs "$TINY" 2>/dev/null; then
    echo "  passed over: needs root to mount a small tmpfs (a full disk)"
else
    trap 'umount "$TINY" 2>/dev/null; it_cleanup' EXIT
    run_ltrun full "${ONE[@]}" --max-epochs 3 --set trainer.log_every_n_steps=1 \
        --set trainer.flush_logs_every_n_steps=1 --set checkpoint.dirpath="$IT_TMP/full-ck" \
        --default-root-dir "$TINY"
    F=$TINY/lt_logs/version_0/metrics.csv
    check "full: exits 1 ($RC)" [ "$RC" -eq 1 ]
    check "full: its error line names metrics.csv and the full disk" \
        contains "$IT_TMP/full.err" "^ltrun: error: cannot write $F: No space left on device"
    check "full: said once, not again by the save after the failure" \
        [ "$(grep -c "metrics.csv" "$IT_TMP/full.err")" -eq 1 ]
    check "full: no metrics.csv.tmp left behind" [ ! -e "$F.tmp" ]
    check "full: metrics.csv holds epoch 0's validation, as the last good flush left it" \
        bash -c "grep -q '^0,[0-9]*,[^,]*,[^,]\+,[^,]\+\$' '$F' && [ \"\$(tail -c 1 '$F')\" = '' ]"
    check "full: no line twice, all as wide as the header" well_formed "$F"
    umount "$TINY"
fi
it_finish
