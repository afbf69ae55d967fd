#!/bin/bash
# Bad inputs that used to train on silently, loop forever or fail late: each
# run must exit promptly with a one-line error naming the problem, and with
# README's status: 2 for an input that does not work (also when a ddp worker
# under ltrun refuses it), 1 for a corrupt file (a checkpoint whose metadata
# holds values lt never writes is one).
#   a. labels outside the classes (a label file of 200s): refused when the
#      file is read (data.num_classes), before any step; with num_classes
#      raised past them, the loss still refuses them (its own check); under
#      ddp x 2, where both ranks refuse the file, ltrun says it once, in
#      the line that names the rank (the workers hand it their error)
#   b. a training set with no batches (limit_train_batches = 0, max_epochs -1)
#   c. checkpoint.dirpath below a regular file: refused before any training
#   d. a checkpoint whose lt.seed or lt.epoch metadata was tampered with
#   e. ddp bucket_cap_mb = 0
#   f. ddp fp16 compression over a backend that cannot average f16 (shm):
#      refused when ddp is configured, not at the first allreduce
#   g. a --ckpt-path that does not exist, under ddp x 2 with --max-restarts 1:
#      the refusal is not restarted and ltrun exits 2 as one process would
#   h. a hook override naming a variable (strategy.teardown = path:an int):
#      refused before training; it used to train and then call the int
#      at teardown (SIGSEGV, exit 139)
#   i. a FIFO where a data file or the checkpoint should be, and a directory
#      as --ckpt-path: refused at once (2); the FIFOs used to block forever
#   j. data.dir holding the four files gunzipped (as torchvision's raw/ has
#      them): trains, its images cached like a gzip source's; only the .gz
#      names used to be looked for ("not found", 2)
#   k. data.dir naming a regular file: refused (2) with the fix; it used to
#      exit 1 with "cannot open: Not a directory"; a data.dir without the
#      files names both spellings, <name>(.gz)
#   l. a run that diverges (optimizer.lr = 1e6): it trains on and exits 0,
#      as Lightning's does, but says so once; and a NaN monitor value never
#      becomes best.safetensors (it did at the first epoch, and froze best)
source "$(dirname "$0")/common.sh"
it_init bad_inputs "$@"
fails_with() { # fails_with LABEL STATUS NEEDLE args...: ltrun exits STATUS (any: non-zero), stderr has NEEDLE
    local label=$1 want=$2 needle=$3; shift 3
    run_ltrun "$label" "$@" --default-root-dir "$IT_TMP/$label"
    if [ "$want" = any ]; then
        check "$label: exits non-zero ($RC)" [ "$RC" -ne 0 ]
    else
        check "$label: exits $want ($RC)" [ "$RC" -eq "$want" ]
    fi
    check "$label: says '$needle'" contains "$IT_TMP/$label.err" "$needle"
    grep -h "error:" "$IT_TMP/$label.err" | head -1 | sed 's/^/    /'
}

# a. 100 blank images, every label 200
D=$IT_TMP/data
mkdir -p "$D"
{ printf '\x00\x00\x08\x03\x00\x00\x00\x64\x00\x00\x00\x1c\x00\x00\x00\x1c'; head -c 78400 /dev/zero; } | gzip >"$D/train-images-idx3-ubyte.gz"
{ printf '\x00\x00\x08\x01\x00\x00\x00\x64'; head -c 100 /dev/zero | tr '\0' '\310'; } | gzip >"$D/train-labels-idx1-ubyte.gz"
cp "$D/train-images-idx3-ubyte.gz" "$D/t10k-images-idx3-ubyte.gz"
cp "$D/train-labels-idx1-ubyte.gz" "$D/t10k-labels-idx1-ubyte.gz"
SAYS="$D/train-labels-idx1-ubyte.gz: sample 0 has label 200, outside the classes \[0, 10)"
SAYS+=" (100 of its 100 labels are); use the label file of this dataset, or set data.num_classes"
fails_with labels 2 "$SAYS" "${BASE[@]}" --set data.dir="$D" --set data.val_split=10 \
    --batch-size 10 --max-steps 5 --set trainer.num_sanity_val_steps=0
check "labels: one error line, from reading the data, not from a training step" bash -c \
    "[ \$(grep -c . '$IT_TMP/labels.err') -eq 1 ] && ! grep -q training_step '$IT_TMP/labels.err'"
fails_with labels_ddp 2 "$SAYS" "${BASE[@]}" --set data.dir="$D" --set data.val_split=10 \
    --batch-size 10 --max-steps 5 --set trainer.num_sanity_val_steps=0 --strategy ddp --devices 2
check "labels_ddp: one line on stderr, naming the rank, its words, then how it ended" bash -c \
    "[ \$(grep -c . '$IT_TMP/labels_ddp.err') -eq 1 ] && grep -qE \
    '^ltrun: error: rank [01] \\(host [^,]+, pid [0-9]+\\): .*sample 0 has label 200.* \\[(exited with status 2|failed \\(status 2\\)) during setup' \
    '$IT_TMP/labels_ddp.err'"
# Into one file (a job's log, > log 2>&1): stdout is line-buffered, so the
# start-up lines come before the error, as they happened.
"$LTRUN" "${BASE[@]}" --set data.dir="$D" --set data.val_split=10 --batch-size 10 --max-steps 5 \
    --default-root-dir "$IT_TMP/labels_log" >"$IT_TMP/labels_log.txt" 2>&1
check "labels: in a combined log the error is the last line, after the start-up lines" bash -c \
    "grep -q '^lt: accelerator' '$IT_TMP/labels_log.txt' && tail -n 1 '$IT_TMP/labels_log.txt' | grep -q '^ltrun: error: '"
fails_with labels256 2 "label 200 in row 0" "${BASE[@]}" --set data.dir="$D" \
    --set data.val_split=10 --batch-size 10 --max-steps 5 --set trainer.num_sanity_val_steps=0 \
    --set data.num_classes=256

# b. no batches: used to run validation epoch after epoch without end
T0=$(now_ms)
fails_with nobatches 2 "training has no batches" "${BASE[@]}" --set trainer.limit_train_batches=0 \
    --max-epochs -1 --max-steps 5
check "nobatches: fails within 20 s ($(( $(now_ms) - T0 )) ms)" [ $(( $(now_ms) - T0 )) -lt 20000 ]

# c. a file where the checkpoint directory should go
touch "$IT_TMP/afile"
# (refused, 2: the fix is in the config)
fails_with ckptdir 2 "checkpoint.dirpath" "${BASE[@]}" --set checkpoint.dirpath="$IT_TMP/afile/ckpt" --max-steps 5
check "ckptdir: refused before training" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/ckptdir.out'"

# d. tampered checkpoint metadata (same length, so the header stays valid)
run_ltrun good "${BASE[@]}" --seed 42 --max-steps 3 --default-root-dir "$IT_TMP/good"
GOOD=$IT_TMP/good/checkpoints/last.safetensors
check "good: a checkpoint to tamper with" [ -s "$GOOD" ]
LC_ALL=C sed 's/"lt.seed":"42"/"lt.seed":"4x"/' "$GOOD" >"$IT_TMP/seed.safetensors"
LC_ALL=C sed 's/"lt.epoch":"\([0-9]\)"/"lt.epoch":"-"/' "$GOOD" >"$IT_TMP/epoch.safetensors"
check "the tampered copies differ from the original" bash -c "! cmp -s '$GOOD' '$IT_TMP/seed.safetensors' && ! cmp -s '$GOOD' '$IT_TMP/epoch.safetensors'"
fails_with badseed 1 "metadata 'lt.seed' is '4x'" "${BASE[@]}" --max-steps 6 \
    --ckpt-path "$IT_TMP/seed.safetensors"
fails_with badepoch 1 "metadata 'lt.epoch' is '-'" "${BASE[@]}" --max-steps 6 \
    --ckpt-path "$IT_TMP/epoch.safetensors"

# e. zero-sized ddp buckets (one allreduce per gradient element)
fails_with buckets 2 "strategy.bucket_cap_mb" "${BASE[@]}" --strategy ddp --devices 2 --max-steps 2 \
    --set strategy.bucket_cap_mb=0

# f. checked through the backend's supports hook before training (both
#    built-in backends reduce f16, so a supports hook that says no stands in)
fails_with shmfp16 2 "which backend 'shm' cannot reduce" "${BASE[@]}" --strategy ddp --devices 2 --max-steps 2 \
    --set strategy.process_group_backend=shm --set strategy.comm_hook=fp16 \
    --set "backend.supports=$IT_PLUGINS/libhook_overrides.so:supports_no_half"
check "shmfp16: refused before training" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/shmfp16.out'"

# g. the workers open the checkpoint; a refusal is repeated by a restart
fails_with nockpt 2 "/nonexistent.safetensors" "${BASE[@]}" --strategy ddp --devices 2 --max-steps 2 \
    --max-restarts 1 --ckpt-path /nonexistent.safetensors
check "nockpt: not restarted" bash -c "! grep -q 'restarting all' '$IT_TMP/nockpt.err'"

# h. tests/plugins/tp_dataentry.c: not_a_function is an int
DATAENTRY=$(dirname "$IT_PLUGINS")/test-plugins/liblt-strategy-dataentry.so
[ -e "$DATAENTRY" ] || { echo "bad_inputs: FAIL: $DATAENTRY is missing (build tp-dataentry)"; exit 1; }
fails_with datahook 2 "'not_a_function' in $DATAENTRY is a variable (ELF symbol type OBJECT), not a function; name a function" \
    "${BASE[@]}" --max-steps 2 --set "strategy.teardown=$DATAENTRY:not_a_function"
check "datahook: refused before training" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/datahook.out'"
check "datahook: one error line" [ "$(grep -c . "$IT_TMP/datahook.err")" -eq 1 ]

# i. (timeout: a regression would wait on the FIFO for a writer)
F=$IT_TMP/fifo
mkdir -p "$F"
cp "$D"/*.gz "$F"/
rm "$F/train-labels-idx1-ubyte.gz"
mkfifo "$F/train-labels-idx1-ubyte.gz" "$IT_TMP/ckpt.fifo"
T0=$(now_ms)
fails_with fifodata 2 "train-labels-idx1-ubyte.gz: not a regular file, not a data file" "${BASE[@]}" \
    --set data.dir="$F" --set data.val_split=10 --batch-size 10 --max-steps 5
fails_with fifockpt 2 "ckpt.fifo: is not a regular file; name a .safetensors file" "${BASE[@]}" \
    --max-steps 5 --ckpt-path "$IT_TMP/ckpt.fifo"
fails_with dirckpt 2 "is a directory; name a .safetensors file" "${BASE[@]}" --max-steps 5 --ckpt-path "$IT_TMP"
check "fifo, dir: refused within 20 s ($(( $(now_ms) - T0 )) ms)" [ $(( $(now_ms) - T0 )) -lt 20000 ]

# j. the real files, gunzipped, under the names gunzip gives them
P=$IT_TMP/plain
mkdir -p "$P"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte \
         t10k-labels-idx1-ubyte; do
    gzip -dc "$DATA/$f.gz" >"$P/$f"
done
run_ltrun plain "${BASE[@]}" --data-dir "$P" --max-steps 3 --default-root-dir "$IT_TMP/plain" \
    --set data.cache_dir="$IT_TMP/plain-cache"
check "plain: trains on plain files (exit $RC)" [ "$RC" -eq 0 ]
check "plain: no .gz file there" bash -c "! ls '$P'/*.gz 2>/dev/null"
check "plain: the images cached (data.cache_dir)" \
    bash -c "ls '$IT_TMP'/plain-cache/train-images-idx3-ubyte.* >/dev/null"

# k. a regular file, and a folder without the files
SAYS="data.dir = $IT_TMP/afile (--data-dir): not a directory; set data.dir to the folder"
SAYS+=" holding the Fashion-MNIST files"
fails_with filedir 2 "$SAYS" \
    "${BASE[@]}" --data-dir "$IT_TMP/afile" --max-steps 3
check "filedir: one error line" [ "$(grep -c . "$IT_TMP/filedir.err")" -eq 1 ]
mkdir -p "$IT_TMP/nodata"
SAYS="data.dir = $IT_TMP/nodata (--data-dir): $IT_TMP/nodata/train-images-idx3-ubyte(.gz):"
SAYS+=" not found; install dataset-fashion-mnist or set data.dir"
fails_with nodata 2 "$SAYS" \
    "${BASE[@]}" --data-dir "$IT_TMP/nodata" --max-steps 3

# l. divergence
run_ltrun diverge "${BASE[@]}" --max-epochs 2 --set trainer.limit_train_batches=20 \
    --set optimizer.lr=1e6 --set checkpoint.monitor=val_loss --set checkpoint.mode=min \
    --default-root-dir "$IT_TMP/diverge"
check "diverge: trains on and exits 0 ($RC)" [ "$RC" -eq 0 ]
check "diverge: says once that training diverged" [ "$(grep -c 'training diverged' "$IT_TMP/diverge.err")" -eq 1 ]
check "diverge: names the loss, the value and the fix" grep -q \
    "^lt: warning: train_loss is \(NaN\|-\?Inf\) after epoch 0 (step 20): training diverged .*lower optimizer.lr" "$IT_TMP/diverge.err"
check "diverge: no best.safetensors from NaN val_loss" [ ! -e "$IT_TMP/diverge/checkpoints/best.safetensors" ]
check "diverge: last.safetensors is saved" [ -e "$IT_TMP/diverge/checkpoints/last.safetensors" ]
it_finish
