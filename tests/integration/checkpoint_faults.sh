#!/bin/bash
# Faults around checkpoints (issue 13):
#   a. a training process killed (SIGKILL) while it writes last.safetensors,
#      four times, each time started again with the same command
#      (--ckpt-path last): every start removes the temp file the killed one
#      left and resumes from an intact last.safetensors; a temp file of a dead
#      writer that appears during a run goes after the next save; temp names
#      of a live non-lt process (a reused pid) go, look-alike files stay;
#   b. --ckpt-path last under ddp x 2: the first run finds nothing and starts
#      fresh (one line), the second resumes, and the result equals an
#      uninterrupted 2-epoch run bit for bit; last and best for --test and
#      --validate; a missing best, a missing last to evaluate and a missing
#      file are refused (2);
#   c. strict loading: a checkpoint with an extra tensor is refused (2, the
#      tensor named) and loads with checkpoint.strict = false; a missing
#      tensor is refused; a weights-only file (no metadata, as
#      safetensors.torch.save_file writes it) tests to the same accuracy as
#      the checkpoint it came from and starts a fit at step 0; metadata lt
#      never writes (lt.epoch past int64, lt.world_size 0, -1 or garbage:
#      a damaged file, exit 1) and another model's name in lt.model (with
#      the same tensors: exit 2) are refused in one line naming file, key and
#      value (also by --check, and by ltrun before it starts ddp workers),
#      leaving the directory's last as it was;
#      checkpoint.strict = false loads the other model's file with a warning;
#      tensors of other sizes or another precision are refused by --check
#      too, naming the precision the file was saved at;
#   d. a new run in a directory holding an earlier run's last and best keeps
#      them as last-v1 / best-v1 (byte for byte, one line saying so) and
#      saves its own under the plain names; a third run keeps the second's
#      as -v2; a run resuming from the directory's last overwrites it, one
#      resuming from last-v1 keeps the plain ones as -v3;
#   e. the directory is one run's at a time: a second run (one process, or
#      ddp x 2) while another trains there is refused before it touches
#      anything (2, one line naming the holder), and claims it once the
#      holder is killed; a run that fails before its first save (a
#      misspelt checkpoint.monitor) leaves the earlier run's last where
#      --ckpt-path last resumes it; a checkpoint directory lt cannot write
#      into (a read-only mount, as root) is refused at start, not after an
#      epoch.
source "$(dirname "$0")/common.sh"
it_init checkpoint_faults "$@"
command -v python3 >/dev/null || it_skip "no python3 to write weights-only files (scripts/install-deps.sh installs it)"
ST_EDIT=(python3 "$SRC/tests/integration/st_edit.py")

fails_with() { # fails_with LABEL NEEDLE args...: ltrun exits $EXIT_WANTED (2) and its stderr has NEEDLE
    local label=$1 needle=$2 want=${EXIT_WANTED:-2}; shift 2
    run_ltrun "$label" "$@"
    check "$label: refused, exit $want ($RC)" [ "$RC" -eq "$want" ]
    check "$label: says '$needle'" contains "$IT_TMP/$label.err" "$needle"
    grep -h "error:" "$IT_TMP/$label.err" | head -1 | sed 's/^/    /'
}
inode() { stat -c %i "$1" 2>/dev/null || echo none; }
dead_pid() { (exit 0) & local p=$!; wait $p; echo $p; }
meta() { head -c 4096 "$1" | grep -ao "\"$2\":\"[^\"]*\"" | sed 's/.*:"\(.*\)"/\1/'; }
writer_temps() { ls "$1" 2>/dev/null | grep -E '^(last|best)\.safetensors\.tmp\.[1-9][0-9]*$'; }

# ---- a. killed while saving ------------------------------------------------
# 46 MB checkpoints (hidden 2048 with momentum) after 2-batch epochs: most of
# each epoch is the save, so a kill is easy to land inside one.
K=$IT_TMP/kill
CK=$K/checkpoints
KILLRUN=(--seed 1 --set model.hidden=2048 --set trainer.limit_train_batches=2
         --set trainer.limit_val_batches=0 --set checkpoint.monitor= --ckpt-path last --default-root-dir "$K")
mkdir -p "$CK"
DEAD=$(dead_pid)
sleep 300 &
SLEEPER=$!
IT_PIDS+=($SLEEPER)
touch "$CK/last.safetensors.tmp.$DEAD" "$CK/best.safetensors.tmp.$SLEEPER"
LOOKALIKE=("last.safetensors.tmp.$DEAD.part" "last.safetensors.tmp.0$DEAD" "notes.safetensors.tmp.$DEAD"
           "last.safetensors.bak" "last.safetensors.tmp.")
for f in "${LOOKALIKE[@]}"; do echo keep >"$CK/$f"; done

echo "checkpoint_faults: a. kill -9 during a save, 4 times, the same command each time"
LEFT=0
PREV=
for i in 1 2 3 4; do
    before=$(inode "$CK/last.safetensors")
    "$LTRUN" "${BASE[@]}" "${KILLRUN[@]}" --max-epochs 1000 >"$IT_TMP/kill$i.out" 2>"$IT_TMP/kill$i.err" &
    P=$!
    IT_PIDS+=($P)
    # One save of this run completes (a new inode), the next is caught in the act.
    for j in $(seq 3000); do [ "$(inode "$CK/last.safetensors")" != "$before" ] && break; alive $P || break; sleep 0.01; done
    for j in $(seq 3000); do [ -e "$CK/last.safetensors.tmp.$P" ] && break; alive $P || break; sleep 0.002; done
    kill -9 $P 2>/dev/null
    wait $P 2>/dev/null # (no "Killed" notice)
    RC=$?
    check "run $i (pid $P) ended by SIGKILL, exit $RC" [ $RC -eq 137 ]
    [ $RC -eq 137 ] || show_tail "$IT_TMP/kill$i.err" 4
    if [ $i -eq 1 ]; then
        check "run 1 removed the planted temp file of a dead pid" [ ! -e "$CK/last.safetensors.tmp.$DEAD" ]
        check "run 1 removed best's temp file named by a live non-lt pid (sleep, a reused pid)" \
            [ ! -e "$CK/best.safetensors.tmp.$SLEEPER" ]
    fi
    [ -n "$PREV" ] && check "run $i removed the temp file run $((i - 1)) left" [ ! -e "$CK/last.safetensors.tmp.$PREV" ]
    PREV=
    if [ -e "$CK/last.safetensors.tmp.$P" ]; then LEFT=$((LEFT + 1)); PREV=$P; fi
done
check "the kills landed inside saves ($LEFT of 4 left a temp file; at least 2)" [ $LEFT -ge 2 ]
E=$(meta "$CK/last.safetensors" lt.epoch)
check "each killed run resumed and saved once more (last.safetensors at epoch ${E:-none}, want >= 4)" [ "${E:-0}" -ge 4 ]

echo "checkpoint_faults: a. the same command once more, to the end (epoch $((${E:-0} + 8)))"
before=$(inode "$CK/last.safetensors")
"$LTRUN" "${BASE[@]}" "${KILLRUN[@]}" --max-epochs $((${E:-0} + 8)) >"$IT_TMP/final.out" 2>"$IT_TMP/final.err" &
P=$!
IT_PIDS+=($P)
for j in $(seq 3000); do [ "$(inode "$CK/last.safetensors")" != "$before" ] && break; alive $P || break; sleep 0.01; done
LATE=$(dead_pid)
touch "$CK/last.safetensors.tmp.$LATE"
wait $P
RC=$?
check "the final run exits 0 ($RC)" [ $RC -eq 0 ]
[ $RC -eq 0 ] || show_tail "$IT_TMP/final.err" 4
check "it resumed from last.safetensors at epoch ${E:-none}" \
    contains "$IT_TMP/final.out" "resumed from $CK/last.safetensors (epoch ${E:-none},"
check "a dead writer's temp file planted during the run went after a save" [ ! -e "$CK/last.safetensors.tmp.$LATE" ]
check "and it said so" contains "$IT_TMP/final.out" "removed 1 temp file $CK/last.safetensors.tmp.<pid>"
check "no temp file of a writer is left ($(writer_temps "$CK" | tr '\n' ' '))" [ -z "$(writer_temps "$CK")" ]
KEPT=0
for f in "${LOOKALIKE[@]}"; do [ "$(cat "$CK/$f" 2>/dev/null)" = keep ] && KEPT=$((KEPT + 1)); done
check "files that only look like temp files are untouched ($KEPT of ${#LOOKALIKE[@]})" [ $KEPT -eq ${#LOOKALIKE[@]} ]
kill -9 $SLEEPER 2>/dev/null
wait $SLEEPER 2>/dev/null

# ---- b. --ckpt-path last / best ----------------------------------------------
echo "checkpoint_faults: b. ddp x 2: --ckpt-path last twice vs 2 epochs straight"
R=$IT_TMP/resume
RUNB=(--strategy ddp --devices 2 --seed 3 --set trainer.limit_train_batches=30)
run_ltrun ref "${BASE[@]}" "${RUNB[@]}" --max-epochs 2 --default-root-dir "$IT_TMP/ref"
check "reference exits 0" [ "$RC" -eq 0 ]
run_ltrun last1 "${BASE[@]}" "${RUNB[@]}" --max-epochs 1 --ckpt-path last --default-root-dir "$R"
check "first --ckpt-path last run exits 0" [ "$RC" -eq 0 ]
N=$(grep -c "ckpt-path last: no $R/checkpoints/last.safetensors yet; training starts fresh" "$IT_TMP/last1.out")
check "it said once that it starts fresh ($N times)" [ "$N" -eq 1 ]
check "it wrote last.safetensors after its epoch" [ "$(meta "$R/checkpoints/last.safetensors" lt.epoch)" = 1 ]
run_ltrun last2 "${BASE[@]}" "${RUNB[@]}" --max-epochs 2 --ckpt-path last --default-root-dir "$R"
check "second run (the same command, --max-epochs 2) exits 0" [ "$RC" -eq 0 ]
check "it resumed from last.safetensors" contains "$IT_TMP/last2.out" "resumed from $R/checkpoints/last.safetensors (epoch 1,"
ckpt_equal "$R/checkpoints/last.safetensors" "$IT_TMP/ref/checkpoints/last.safetensors" 0 both \
    "1 + 1 epochs through --ckpt-path last equal 2 epochs straight"

run_ltrun testlast "${BASE[@]}" --test --ckpt-path last --default-root-dir "$R"
check "--test --ckpt-path last exits 0 and tests" bash -c "[ $RC -eq 0 ] && grep -q 'test results' '$IT_TMP/testlast.out'"
check "it tested last.safetensors" contains "$IT_TMP/testlast.out" "from $R/checkpoints/last.safetensors"
run_ltrun valbest "${BASE[@]}" --validate --ckpt-path best --default-root-dir "$R"
check "--validate --ckpt-path best exits 0 and validates" bash -c "[ $RC -eq 0 ] && grep -q 'validation results' '$IT_TMP/valbest.out'"
check "it validated best.safetensors" contains "$IT_TMP/valbest.out" "from $R/checkpoints/best.safetensors"
fails_with nobest "ckpt-path best: there is no $IT_TMP/empty/checkpoints/best.safetensors" \
    "${BASE[@]}" --max-epochs 1 --ckpt-path best --default-root-dir "$IT_TMP/empty"
fails_with nolast "ckpt-path last: there is no $IT_TMP/empty/checkpoints/last.safetensors to evaluate" \
    "${BASE[@]}" --test --ckpt-path last --default-root-dir "$IT_TMP/empty"
fails_with nofile "$IT_TMP/empty/last" "${BASE[@]}" --max-epochs 1 --ckpt-path "$IT_TMP/empty/last" \
    --default-root-dir "$IT_TMP/empty"

# ---- c. strict loading, weights only ------------------------------------------
echo "checkpoint_faults: c. extra and missing tensors, a weights-only file"
LAST=$R/checkpoints/last.safetensors
"${ST_EDIT[@]}" add "$LAST" "$IT_TMP/extra.safetensors" head.extra
"${ST_EDIT[@]}" drop "$LAST" "$IT_TMP/missing.safetensors" fc2.bias
"${ST_EDIT[@]}" setmeta "$LAST" "$IT_TMP/epochbig.safetensors" lt.epoch 99999999999999999999
# Not resumed at INT64_MAX (training nothing): refused, as every value lt never writes.
EXIT_WANTED=1 fails_with epochbig "metadata 'lt.epoch' is '99999999999999999999', expected an integer in \[0, " \
    "${BASE[@]}" --max-epochs 3 --ckpt-path "$IT_TMP/epochbig.safetensors" \
    --default-root-dir "$IT_TMP/eb"
one_line() { [ "$(grep -c . "$IT_TMP/$1.err")" -eq 1 ]; }
# The same tensors under another model's name, resumed in $R: refused
# before anything there is touched.
cp "$LAST" "$IT_TMP/last.before"
OM=$IT_TMP/othermodel.safetensors
"${ST_EDIT[@]}" setmeta "$LAST" "$OM" lt.model fashion_mnist_cnn
SAYS="checkpoint $OM was saved by model 'fashion_mnist_cnn' (metadata lt.model), this run"
SAYS+=" trains 'fashion_mnist_mlp'; resume it with model.name = fashion_mnist_cnn, or set"
SAYS+=" checkpoint.strict = false"
fails_with othermodel "$SAYS" "${BASE[@]}" --max-epochs 3 --ckpt-path "$OM" --default-root-dir "$R"
check "othermodel: one line" one_line othermodel
check "othermodel: $R's last.safetensors is untouched" cmp -s "$IT_TMP/last.before" "$LAST"
fails_with othermodel_check "was saved by model 'fashion_mnist_cnn'" "${BASE[@]}" \
    --ckpt-path "$OM" --check
fails_with othermodel_ddp "was saved by model 'fashion_mnist_cnn'" "${BASE[@]}" --strategy ddp \
    --devices 2 --max-epochs 3 --ckpt-path "$OM" --default-root-dir "$IT_TMP/omd"
check "othermodel_ddp: one line, refused before any worker starts" one_line othermodel_ddp
run_ltrun othermodel_lenient "${BASE[@]}" --max-epochs 3 --set trainer.limit_train_batches=5 \
    --ckpt-path "$OM" --set checkpoint.strict=false --default-root-dir "$IT_TMP/oml"
check "checkpoint.strict = false resumes the other model's file (exit $RC)" [ "$RC" -eq 0 ]
check "and warns naming the model" contains "$IT_TMP/othermodel_lenient.err" \
    "(checkpoint.strict = false): saved by model 'fashion_mnist_cnn' (lt.model), loaded into"
for ws in 0 -1 two; do
    WS=$IT_TMP/ws$ws.safetensors
    "${ST_EDIT[@]}" setmeta "$LAST" "$WS" lt.world_size "$ws"
    EXIT_WANTED=1 fails_with "ws$ws" "checkpoint $WS: metadata 'lt.world_size' is '$ws', expected an integer" \
        "${BASE[@]}" --max-epochs 3 --ckpt-path "$WS" --default-root-dir "$R"
    check "ws$ws: one line" one_line "ws$ws"
done
EXIT_WANTED=1 fails_with ws0_check "metadata 'lt.world_size' is '0'" "${BASE[@]}" \
    --ckpt-path "$IT_TMP/ws0.safetensors" --check
check "ws*: $R's last.safetensors is untouched" cmp -s "$IT_TMP/last.before" "$LAST"
"${ST_EDIT[@]}" weights "$LAST" "$IT_TMP/weights.safetensors"
check "weights-only file has no metadata and no optimizer state" \
    bash -c "! head -c 4096 '$IT_TMP/weights.safetensors' | grep -aq -e __metadata__ -e optimizer"
WANT=$(grep -h "test results" "$IT_TMP/testlast.out")
fails_with extra "tensor 'head.extra', which model 'fashion_mnist_mlp' does not have" \
    "${BASE[@]}" --test --ckpt-path "$IT_TMP/extra.safetensors" --default-root-dir "$IT_TMP/c"
run_ltrun lenient "${BASE[@]}" --test --ckpt-path "$IT_TMP/extra.safetensors" --set checkpoint.strict=false \
    --default-root-dir "$IT_TMP/c"
check "checkpoint.strict=false loads it (exit $RC)" [ "$RC" -eq 0 ]
check "and warns naming the ignored tensor" contains "$IT_TMP/lenient.err" "ignored 1 tensor model 'fashion_mnist_mlp' does not have (first 'head.extra')"
check "with the checkpoint's test results ($WANT)" [ -n "$WANT" -a "$(grep -h 'test results' "$IT_TMP/lenient.out")" = "$WANT" ]
fails_with missing "has no tensor 'fc2.bias'" \
    "${BASE[@]}" --test --ckpt-path "$IT_TMP/missing.safetensors" --default-root-dir "$IT_TMP/c"
run_ltrun weights "${BASE[@]}" --test --ckpt-path "$IT_TMP/weights.safetensors" --default-root-dir "$IT_TMP/c"
check "--test with the weights-only file exits 0" [ "$RC" -eq 0 ]
check "it says the file is weights only" contains "$IT_TMP/weights.out" "weights-only file"
GOT=$(grep -h "test results" "$IT_TMP/weights.out")
check "same test results as the checkpoint it came from ($GOT)" [ -n "$WANT" -a "$GOT" = "$WANT" ]
# lr 0: the steps change nothing, so the finished parameters are the loaded ones.
run_ltrun wfit "${BASE[@]}" --seed 5 --max-epochs 1 --set trainer.limit_train_batches=30 --set optimizer.lr=0 \
    --ckpt-path "$IT_TMP/weights.safetensors" --default-root-dir "$IT_TMP/wfit"
check "fit from the weights-only file exits 0" [ "$RC" -eq 0 ]
check "it says it starts at step 0 with a fresh optimizer" contains "$IT_TMP/wfit.out" "training starts at epoch 0, step 0 with a fresh optimizer"
WL=$IT_TMP/wfit/checkpoints/last.safetensors
check "its checkpoint counts from step 0 (epoch $(meta "$WL" lt.epoch), step $(meta "$WL" lt.global_step); want 1, 30) with this run's seed ($(meta "$WL" lt.seed))" \
    [ "$(meta "$WL" lt.epoch)/$(meta "$WL" lt.global_step)/$(meta "$WL" lt.seed)" = 1/30/5 ]
ckpt_equal "$WL" "$LAST" 0 both "it trained from the file's weights (at lr 0 they stay the same)"

# A checkpoint whose tensors do not fit the model (other sizes, another
# precision) is refused by --check, as the run would refuse it, naming the
# fix: --check said "configuration valid" and the run failed at its load.
fails_with shape_check "tensor 'fc1.weight' is f32 \[64, 784\], the model's is f32 \[256, 784\]; it was saved from another model or other model.\* settings" \
    "${BASE[@]}" --check --ckpt-path "$LAST" --set model.hidden=256
fails_with prec_check "is f32 \[64, 784\], the model's is f64 \[64, 784\]; it was saved at precision 32-true: resume with --precision 32-true" \
    "${BASE[@]}" --check --ckpt-path "$LAST" --precision 64-true
fails_with prec_run "resume with --precision 32-true" "${BASE[@]}" --max-epochs 2 --ckpt-path "$LAST" \
    --precision 64-true --default-root-dir "$IT_TMP/prec_run"
run_ltrun mixed_check "${BASE[@]}" --check --ckpt-path "$LAST" --precision bf16-mixed
check "bf16-mixed (f32 master parameters) takes the 32-true checkpoint in --check ($RC)" [ "$RC" -eq 0 ]

echo "checkpoint_faults: d. an earlier run's checkpoints in the directory are kept, not overwritten"
K=$IT_TMP/keep
KEEP=(--max-epochs 1 --set trainer.limit_train_batches=20 --set checkpoint.monitor=val_acc
      --set checkpoint.mode=max --default-root-dir "$K")
run_ltrun keep1 "${BASE[@]}" "${KEEP[@]}" --seed 1
cp "$K/checkpoints/last.safetensors" "$IT_TMP/keep1.last"
cp "$K/checkpoints/best.safetensors" "$IT_TMP/keep1.best"
run_ltrun keep2 "${BASE[@]}" "${KEEP[@]}" --seed 2
check "keep2: exits 0" [ "$RC" -eq 0 ]
check "keep2: says which files it kept" contains "$IT_TMP/keep2.out" \
    "held an earlier run's checkpoints: kept last.safetensors as last-v1.safetensors, best.safetensors as best-v1.safetensors"
check "keep2: the first run's last is last-v1, byte for byte" cmp -s "$IT_TMP/keep1.last" "$K/checkpoints/last-v1.safetensors"
check "keep2: the first run's best is best-v1, byte for byte" cmp -s "$IT_TMP/keep1.best" "$K/checkpoints/best-v1.safetensors"
check "keep2: last.safetensors is its own (seed 2)" [ "$(meta "$K/checkpoints/last.safetensors" lt.seed)" = 2 ]
run_ltrun keep3 "${BASE[@]}" "${KEEP[@]}" --seed 3
check "keep3: the second run's last is last-v2" [ "$(meta "$K/checkpoints/last-v2.safetensors" lt.seed)" = 2 ]
check "keep3: last-v1 is still the first run's" cmp -s "$IT_TMP/keep1.last" "$K/checkpoints/last-v1.safetensors"
run_ltrun keep4 "${BASE[@]}" "${KEEP[@]}" --max-epochs 2 --ckpt-path "$K/checkpoints/last.safetensors"
check "keep4 (resumes from the directory's last): exits 0" [ "$RC" -eq 0 ]
check "keep4: keeps nothing" bash -c "! grep -q 'held an earlier' '$IT_TMP/keep4.out'"
check "keep4: no -v3 files" bash -c "! ls '$K/checkpoints' | grep -q v3"
check "keep4: last.safetensors continues the resumed run (epoch 2, seed 3)" \
    [ "$(meta "$K/checkpoints/last.safetensors" lt.epoch)/$(meta "$K/checkpoints/last.safetensors" lt.seed)" = 2/3 ]
# Resuming from an older run's last-v1 continues that run: the newest run's
# plain files are kept from it too (as -v3), not overwritten.
cp "$K/checkpoints/last.safetensors" "$IT_TMP/keep4.last"
run_ltrun keep5 "${BASE[@]}" "${KEEP[@]}" --max-epochs 2 --ckpt-path "$K/checkpoints/last-v1.safetensors"
check "keep5 (resumes from last-v1): exits 0" [ "$RC" -eq 0 ]
check "keep5: the newest run's last is kept as last-v3, byte for byte" cmp -s "$IT_TMP/keep4.last" "$K/checkpoints/last-v3.safetensors"
check "keep5: last.safetensors continues the first run (seed 1)" [ "$(meta "$K/checkpoints/last.safetensors" lt.seed)" = 1 ]

echo "checkpoint_faults: e. one run at a time in a checkpoint directory"
U=$IT_TMP/busy
"$LTRUN" "${BASE[@]}" --max-epochs 1000 --set trainer.limit_train_batches=50 --default-root-dir "$U" \
    >"$IT_TMP/holder.out" 2>&1 &
HOLDER=$!
IT_PIDS+=($HOLDER)
for i in $(seq 600); do grep -q "^pid $HOLDER " "$U/checkpoints/.lt-run.lock" 2>/dev/null && break; sleep 0.1; done
check "busy: the holder wrote its pid in the lock file" grep -q "^pid $HOLDER on host " "$U/checkpoints/.lt-run.lock"
fails_with busy1 "checkpoint directory $U/checkpoints is in use by another run (pid $HOLDER on host " \
    "${BASE[@]}" --max-epochs 1 --default-root-dir "$U"
fails_with busy2 "is in use by another run (pid $HOLDER " "${BASE[@]}" --max-epochs 1 --default-root-dir "$U" \
    --strategy ddp --devices 2
check "busy2: one line on stderr" [ "$(grep -c . "$IT_TMP/busy2.err")" -eq 1 ]
check "busy1: nothing trained" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/busy1.out'"
kill -9 $HOLDER; wait $HOLDER 2>/dev/null
run_ltrun busy3 "${BASE[@]}" --max-epochs 1 --set trainer.limit_train_batches=5 --default-root-dir "$U"
check "busy3: after the holder was killed, a run claims the directory (exit $RC)" [ "$RC" -eq 0 ]

F=$IT_TMP/failfirst
run_ltrun ff1 "${BASE[@]}" --max-epochs 1 --set trainer.limit_train_batches=5 --default-root-dir "$F"
cp "$F/checkpoints/last.safetensors" "$IT_TMP/ff1.last"
fails_with ff2 "val_accuracy" "${BASE[@]}" --max-epochs 1 --set trainer.limit_train_batches=5 \
    --set checkpoint.monitor=val_accuracy --default-root-dir "$F"
check "ff2: the earlier run's last is where it was, byte for byte" cmp -s "$IT_TMP/ff1.last" "$F/checkpoints/last.safetensors"
check "ff2: nothing was moved aside" bash -c "! ls '$F/checkpoints' | grep -q -- '-v1'"
run_ltrun ff3 "${BASE[@]}" --max-epochs 2 --set trainer.limit_train_batches=5 --ckpt-path last --default-root-dir "$F"
check "ff3: --ckpt-path last resumes it (exit $RC)" bash -c "[ $RC -eq 0 ] && ! grep -q 'training starts fresh' '$IT_TMP/ff3.out'"
check "ff3: and continues it (epoch 2)" [ "$(meta "$F/checkpoints/last.safetensors" lt.epoch)" = 2 ]
run_ltrun ff4 "${BASE[@]}" --max-epochs 2 --set trainer.limit_train_batches=5 --ckpt-path last --default-root-dir "$F"
check "ff4: resumed at its max_epochs, it says there is nothing to train (exit $RC)" bash -c "[ $RC -eq 0 ] && grep -q \
    '^lt: nothing to train: the run is at epoch 2, step 10, and trainer.max_epochs = 2; raise it to train on' '$IT_TMP/ff4.out'"

RO=$IT_TMP/ro
mkdir -p "$RO"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o ro,size=64k tmpfs "$RO" 2>/dev/null; then
    fails_with ro "cannot write into the checkpoint directory $RO (creating $RO/.lt-run.lock: Read-only file system)" \
        "${BASE[@]}" --max-epochs 1 --set trainer.limit_train_batches=5 --set checkpoint.dirpath="$RO" \
        --default-root-dir "$IT_TMP/ro_root"
    check "ro: refused before any training" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/ro.out'"
    umount "$RO"
else
    echo "checkpoint_faults: e. read-only checkpoint directory skipped (needs root to mount a read-only tmpfs)"
fi
it_finish
