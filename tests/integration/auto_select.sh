#!/bin/bash
# Lightning's auto_select_gpus (trainer.auto_select_gpus, core/trainer/
# trainer_setup.c): with trainer.devices = k, the first k devices no other
# process uses. The accelerator is the test plugin "busy" (the cpu one
# shown as 4 devices, 0 and 2 in use; tests/plugins/tp_busy_accel.c), so
# the choice is checked without GPUs:
#   - devices 2 trains on [1, 3] under ddp; ltrun chose once and gave the
#     list to its workers (one "auto_select_gpus" line: the workers were
#     given --devices [1, 3] and did not choose again);
#   - devices 3 is refused (exit 2) naming the free and used devices;
#   - a list with auto_select_gpus is refused, as is the cpu accelerator.
source "$(dirname "$0")/common.sh"
it_init auto_select "$@"
TPD=$(dirname "$IT_PLUGINS")/test-plugins
[ -e "$TPD/liblt-accelerator-busy.so" ] || { echo "auto_select: FAIL: $TPD/liblt-accelerator-busy.so is missing (build it)"; exit 1; }
SEL=(--plugin-dir "$TPD" --accelerator busy --set trainer.auto_select_gpus=true)

run_ltrun two "${BASE[@]}" "${SEL[@]}" --strategy ddp --devices 2 --max-steps 3 --default-root-dir "$IT_TMP/two"
check "devices 2: ltrun exits 0" [ "$RC" -eq 0 ]
check "devices 2: it chose [1, 3], naming 0 and 2 as in use" \
    contains "$IT_TMP/two.err" "auto_select_gpus: devices \[1, 3\] (in use by other processes: 0, 2)"
check "devices 2: chosen once (the workers were given the list)" [ "$(grep -c 'auto_select_gpus: devices' "$IT_TMP/two.err")" -eq 1 ]
check "devices 2: 2 workers" contains "$IT_TMP/two.out" "ranks 0-1 of 2"

run_ltrun three "${BASE[@]}" "${SEL[@]}" --strategy ddp --devices 3 --max-steps 3 --default-root-dir "$IT_TMP/three"
check "devices 3: refused, exit 2 (got $RC)" [ "$RC" -eq 2 ]
check "devices 3: says 2 of 4 free, 0 and 2 in use" \
    contains "$IT_TMP/three.err" "3 devices asked (trainer.devices), 2 of 4 free (in use by other processes: 0, 2)"

run_ltrun list "${BASE[@]}" "${SEL[@]}" --devices "[1, 3]" --max-steps 3 --default-root-dir "$IT_TMP/list"
check "a list: refused, exit 2 (got $RC)" [ "$RC" -eq 2 ]
check "a list: asks for a count" contains "$IT_TMP/list.err" "give trainer.devices as a count k"

run_ltrun cpu "${BASE[@]}" --accelerator cpu --set trainer.auto_select_gpus=true --devices 2 --max-steps 3 \
    --default-root-dir "$IT_TMP/cpu"
check "cpu: refused, exit 2 (got $RC)" [ "$RC" -eq 2 ]
it_finish
