#!/bin/bash
# Overrides that work: strategy hooks replaced on 2 ddp ranks must train the
# same model as plain ddp, or fail at once with a message that says why.
# Every run: same seed, 2 ranks x batch 32, 30 steps; the parameters of its
# last checkpoint are compared with plain ddp's, bit for bit (with 2 ranks
# each averaged gradient element is (a + b) / 2 whatever the buckets or the
# group, so nothing short of a real difference can move a bit).
#  - a plain shared object's functions (tests/integration/hook_overrides.c)
#    named by --set strategy.<hook>=path.so:symbol or by an INI file:
#    init_via_original (reaches ddp's through lt_ctx_original),
#    init_own_group and configure_own (never call ddp's);
#  - a strategy with base = "ddp" (tests/integration/ddp_super.c) that wraps
#    configure_ddp and teardown through super, checks the parameter views
#    and the published buckets, and with strategy.rebucket publishes a cut
#    of its own that ddp's gradient hooks must follow (with the cut on rank
#    0 only, the ranks' allreduces differ and the run must fail: proof that
#    ddp communicates the published buckets, not a cut of its own);
#  - failures: init_no_group (leaves no default group), configure_bad_buckets
#    (overlapping buckets), a hook asking for an original that was not
#    replaced: non-zero exit within seconds, one line saying what is wrong.
# Sanity: a run with seed 2 is told from the reference.
source "$(dirname "$0")/common.sh"
it_init overrides "$@"
HOOKS="$IT_PLUGINS/libhook_overrides.so"
for f in "$HOOKS" "$IT_PLUGINS/liblt-strategy-ddp_super.so"; do
    [ -e "$f" ] || { echo "overrides: FAIL: $f is missing (build the hook_overrides and lt-strategy-ddp_super targets)"; exit 1; }
done
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1 --devices 2 --batch-size 32 --max-steps 30)
SUPER=(--strategy ddp_super --plugin-dir "$IT_PLUGINS")
LIMIT_S=60   # no run may take longer (a hang is a failure, not a ctest timeout)
FAIL_MS=30000 # the failing runs must end well within this

ckpt_of() { echo "$IT_TMP/$1/checkpoints/last.safetensors"; }
logs_of() { cat "$IT_TMP/$1.out" "$IT_TMP/$1.err"; }
has() { logs_of "$1" | grep -qE -- "$2"; } # has LABEL ERE: a line of its output matches
count() { logs_of "$1" | grep -cE -- "$2"; }

run_case() { # run_case LABEL args... -> RC, MS
    local label=$1; shift
    local t0=$(now_ms)
    timeout -k 5 $LIMIT_S "$LTRUN" "${BASE[@]}" "${SAME[@]}" --default-root-dir "$IT_TMP/$label" "$@" \
        >"$IT_TMP/$label.out" 2>"$IT_TMP/$label.err"
    RC=$?
    MS=$(( $(now_ms) - t0 ))
    echo "  ($label: exit $RC after $MS ms)"
}

train() { # train LABEL args...: must succeed and write a checkpoint
    run_case "$@"
    local label=$1
    if [ "$RC" -ne 0 ]; then tail -n 8 "$IT_TMP/$label.out" "$IT_TMP/$label.err" | sed 's/^/    /'; fi
    check "$label: ltrun exits 0" [ "$RC" -eq 0 ]
    check "$label: wrote checkpoints/last.safetensors" [ -s "$(ckpt_of $label)" ]
}

identical() { ckpt_equal "$(ckpt_of $1)" "$(ckpt_of ref)" 0 both "$1 equals plain ddp bit for bit"; }

refused() { # refused LABEL ERE args...: must fail within FAIL_MS, one error line matching ERE
    local label=$1 re=$2; shift 2
    run_case "$label" "$@"
    check "$label: ltrun exits 2, refused: the override breaks a hook's contract every time (exit $RC)" [ "$RC" -eq 2 ]
    check "$label: ended within $FAIL_MS ms ($MS ms)" [ "$MS" -lt $FAIL_MS ]
    check "$label: one line says: $re" has "$label" "^ltrun: error: .*$re"
    check "$label: no checkpoint" [ ! -e "$(ckpt_of $label)" ]
    has "$label" "^ltrun: error: .*$re" || tail -n 6 "$IT_TMP/$label.err" | sed 's/^/    /'
}

echo "overrides: reference: plain ddp, 2 ranks x 32, 30 steps"
train ref --strategy ddp
check "ref: ran 2 workers" has ref "starting 2 workers"

echo "overrides: init_dist_connection = libhook_overrides.so:init_via_original (--set), calls ddp's through lt_ctx_original"
train via --strategy ddp --set "strategy.init_dist_connection=$HOOKS:init_via_original"
check "via: the hook was taken from the object" has via "hook init_dist_connection taken from .*libhook_overrides.so:init_via_original"
check "via: rank 0 joined through the original" has via "^\[rank 0\] .*init_via_original: rank 0 joined$"
check "via: rank 1 joined through the original" has via "^\[rank 1\] .*init_via_original: rank 1 joined$"
identical via

echo "overrides: the same from an INI file ([strategy] init_dist_connection = ...)"
{ cat "$SRC/examples/fashion_mnist/train.ini"
  printf '\n[strategy]\ninit_dist_connection = %s:init_via_original\n' "$HOOKS"; } >"$IT_TMP/via.ini"
train viaini --config "$IT_TMP/via.ini" --strategy ddp
check "viaini: both ranks joined through the original" [ "$(count viaini 'init_via_original: rank [01] joined$')" -eq 2 ]
identical viaini

echo "overrides: strategy ddp_super (base ddp; configure_ddp and teardown through super)"
train super "${SUPER[@]}"
check "super: rank 0 logged its checks, once" [ "$(count super 'ddp_super: 6 params, 55050 elements, 1 buckets$')" -eq 1 ]
check "super: no warning (root slot taken, teardown)" bash -c "! grep -qi 'warning' '$IT_TMP/super.err'"
identical super

echo "overrides: ddp_super over 12 buckets (strategy.bucket_cap_mb 0.02, first_bucket_mb 0.005)"
train super12 "${SUPER[@]}" --set strategy.bucket_cap_mb=0.02 --set strategy.first_bucket_mb=0.005
check "super12: checked 12 published buckets" has super12 "ddp_super: 6 params, 55050 elements, 12 buckets$"
identical super12

echo "overrides: ddp_super with strategy.ddp_super.rebucket=true: one bucket per parameter, reverse order"
train rebucket "${SUPER[@]}" --set strategy.ddp_super.rebucket=true
check "rebucket: published 6 buckets" has rebucket "1 buckets, rebucketed to 6 \(one per parameter\)"
identical rebucket

echo "overrides: INI: ddp_super, [strategy.ddp_super] rebucket = true, and init_via_original over it"
{ cat "$SRC/examples/fashion_mnist/train.ini"
  printf '\n[strategy]\ninit_dist_connection = %s:init_via_original\n' "$HOOKS"
  printf '\n[strategy.ddp_super]\nrebucket = true\n'; } >"$IT_TMP/stack.ini"
train stack --config "$IT_TMP/stack.ini" "${SUPER[@]}"
check "stack: both ranks joined through the original (ddp's, inherited by ddp_super)" \
    [ "$(count stack "strategy/ddp_super: init_via_original: rank [01] joined$")" -eq 2 ]
check "stack: rebucketed to 6" has stack "rebucketed to 6"
identical stack

echo "overrides: the published cut on rank 0 only (rebucket_rank=0): ddp follows it, so the ranks' allreduces differ"
run_case split "${SUPER[@]}" --set strategy.rebucket=true --set strategy.rebucket_rank=0 --set strategy.timeout_s=15
check "split: ltrun exits non-zero ($RC)" [ "$RC" -ne 0 -a "$RC" -ne 124 -a "$RC" -ne 137 ]
check "split: ended within $FAIL_MS ms ($MS ms)" [ "$MS" -lt $FAIL_MS ]
check "split: only rank 0 rebucketed" [ "$(count split 'rebucketed to 6')" -eq 1 ]
# The first failed bucket's fingerprint check names the mismatch; the
# buckets queued behind it fail too but must not replace that message (ddp
# keeps the first error, the group its first cause).
check "split: the gradient communication failed" has split "^ltrun: error: .*before_optimizer_step failed: .*allreduce #"
check "split: the message names the mismatch on collective #3" has split "ranks disagree on collective #3 of group 'default'"

echo "overrides: init_dist_connection = init_own_group: its own group, never ddp's hook"
train own --strategy ddp --set "strategy.init_dist_connection=$HOOKS:init_own_group"
check "own: both ranks in group 'mine'" [ "$(count own "init_own_group: rank [01] of 2 in group 'mine'")" -eq 2 ]
identical own

echo "overrides: configure_ddp = configure_own: broadcast and buckets of its own, never ddp's hook"
train confown --strategy ddp --set "strategy.configure_ddp=$HOOKS:configure_own"
check "confown: published 6 buckets" has confown "configure_own: 6 buckets, one per parameter"
identical confown

echo "overrides: failures"
refused nogroup "init_dist_connection left no default process group; it must call lt_run_new_group and lt_run_set_default_group" \
    --strategy ddp --set "strategy.init_dist_connection=$HOOKS:init_no_group"
refused badbuckets "configure_ddp failed: lt_run_set_buckets: bucket 0 \[27525, \+27525\) overlaps bucket 1" \
    --strategy ddp --set "strategy.configure_ddp=$HOOKS:configure_bad_buckets"
# init_via_original put in configure_ddp's place: init_dist_connection was not
# replaced, so lt_ctx_original has nothing for it.
refused noorig "configure_ddp failed: hook_overrides: lt_ctx_original\(ctx, \"init_dist_connection\"\) is NULL" \
    --strategy ddp --set "strategy.configure_ddp=$HOOKS:init_via_original"

echo "overrides: sanity: the comparison notices a different run (seed 2)"
train seed2 --strategy ddp --seed 2
ckpt_differ "$(ckpt_of seed2)" "$(ckpt_of ref)" 1e-3 norm "seed 2 is told from the reference"
it_finish
