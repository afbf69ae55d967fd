#!/bin/bash
# ddp_spawn (the trainer forks its workers) must train exactly what ddp
# (ltrun starts them) trains: 2 ranks x batch 32, 20 steps, same seed;
# parameters within a relative difference of 1e-5, elementwise and in norm.
source "$(dirname "$0")/common.sh"
it_init ddp_spawn_equivalence "$@"
TOL=1e-5
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1 --devices 2 --batch-size 32 --max-steps 20)
[ -e "$PLUGINS/liblt-strategy-ddp_spawn.so" ] || { echo "ddp_spawn_equivalence: FAIL: no ddp_spawn plugin in $PLUGINS"; exit 1; }
for s in ddp ddp_spawn; do
    run_ltrun $s "${BASE[@]}" "${SAME[@]}" --strategy $s --default-root-dir "$IT_TMP/$s"
    check "$s: ltrun exits 0" [ "$RC" -eq 0 ]
    check "$s: wrote checkpoints/last.safetensors" [ -s "$IT_TMP/$s/checkpoints/last.safetensors" ]
done
check "ddp ran under the launcher (ddp_spawn did not)" bash -c \
    "grep -q 'starting 2 workers' '$IT_TMP/ddp.out' && ! grep -q 'starting 2 workers' '$IT_TMP/ddp_spawn.out'"
ckpt_equal "$IT_TMP/ddp_spawn/checkpoints/last.safetensors" "$IT_TMP/ddp/checkpoints/last.safetensors" $TOL both \
    "ddp_spawn equals ddp"
it_finish
