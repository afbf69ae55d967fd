#!/bin/bash
# When srun, mpirun or torchrun already started one process per rank, ltrun
# starts nothing: each process trains as one worker, rank 0 hosts the
# rendezvous store (no launcher does), and the job equals ddp under ltrun.
# Two processes are started by hand with SLURM's variables, then with
# torchrun's; each job's checkpoint is compared with a single process on the
# combined batch, as in ddp_equivalence. A worker whose launcher's world size
# disagrees with the config refuses it as ltrun would: exit 2, one line; so
# does a one-process strategy (single_device, dp) under a launcher of 2.
# With no thread count set, each process takes its share of the cores (here
# 2 cores / 2 processes = 1 BLAS thread), not every core's worth.
source "$(dirname "$0")/common.sh"
it_init external_launch "$@"
SAME=(--seed 1 --set data.shuffle=true --set optimizer.name=sgd --set optimizer.lr=0.05
      --set optimizer.momentum=0.9 --max-epochs 1 --max-steps 20)

run_pair() { # run_pair LABEL "ENV for rank 0" "ENV for rank 1"
    local label=$1 pids=() r
    for r in 0 1; do
        local envs=$2; [ $r = 1 ] && envs=$3
        env -u OPENBLAS_NUM_THREADS -u OMP_NUM_THREADS $envs "$LTRUN" "${BASE[@]}" "${SAME[@]}" --strategy ddp --devices 2 --batch-size 32 --log-level debug \
            --default-root-dir "$IT_TMP/$label" >"$IT_TMP/$label.$r.out" 2>"$IT_TMP/$label.$r.err" &
        pids+=($!)
    done
    local rc0=0 rc1=0
    wait "${pids[0]}" || rc0=$?
    wait "${pids[1]}" || rc1=$?
    check "$label: rank 0 exits 0" [ $rc0 -eq 0 ]
    check "$label: rank 1 exits 0" [ $rc1 -eq 0 ]
    [ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { show_tail "$IT_TMP/$label.0.err"; show_tail "$IT_TMP/$label.1.err"; }
    check "$label: started no workers of its own" bash -c "! grep -q 'starting 2 workers' '$IT_TMP/$label.0.out' '$IT_TMP/$label.0.err'"
    check "$label: wrote checkpoints/last.safetensors" [ -s "$IT_TMP/$label/checkpoints/last.safetensors" ]
    ckpt_equal "$IT_TMP/$label/checkpoints/last.safetensors" "$IT_TMP/single/checkpoints/last.safetensors" \
        1e-5 norm "$label equals one process with batch 64"
}

run_ltrun single "${BASE[@]}" "${SAME[@]}" --strategy single_device --devices 1 --batch-size 64 \
    --default-root-dir "$IT_TMP/single"
check "single: ltrun exits 0" [ "$RC" -eq 0 ]

PORT=$("$TCP_PORT" free)
COMMON_SLURM="SLURM_NTASKS=2 SLURM_NNODES=1 SLURM_NODEID=0 SLURM_JOB_NAME=lt SLURM_NODELIST=127.0.0.1 MASTER_PORT=$PORT"
echo "external_launch: srun-style: SLURM_PROCID 0 and 1, rank 0 hosts the store on port $PORT"
run_pair slurm "$COMMON_SLURM SLURM_PROCID=0 SLURM_LOCALID=0" "$COMMON_SLURM SLURM_PROCID=1 SLURM_LOCALID=1"
CORES=$(nproc)
EACH=$(( CORES / 2 > 1 ? CORES / 2 : 1 ))
for r in 0 1; do
    check "slurm: rank $r takes its share of the $CORES cores ($EACH BLAS thread(s))" \
        grep -q "$EACH BLAS threads\? per process (external launch" "$IT_TMP/slurm.$r.err"
done

PORT=$("$TCP_PORT" pair) # lt's store takes MASTER_PORT + 1 under torchrun
COMMON_TE="TORCHELASTIC_RUN_ID=lt-test WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT"
echo "external_launch: torchrun-style: RANK 0 and 1; lt's store on MASTER_PORT + 1, OMP_NUM_THREADS=1 as torchrun sets it"
run_pair torchrun "$COMMON_TE RANK=0 LOCAL_RANK=0 OMP_NUM_THREADS=1" "$COMMON_TE RANK=1 LOCAL_RANK=1 OMP_NUM_THREADS=1"
check "torchrun: a thread count the launcher set is left alone" \
    bash -c "! grep -q 'BLAS thread' '$IT_TMP/torchrun.0.err' '$IT_TMP/torchrun.1.err'"

# The check comes before the rendezvous, so one process shows it (and the
# timeout only guards against a regression that would wait for 2 more).
echo "external_launch: torchrun-style WORLD_SIZE=3 against --devices 2: refused"
env ${COMMON_TE/WORLD_SIZE=2/WORLD_SIZE=3} RANK=0 LOCAL_RANK=0 timeout 60 "$LTRUN" "${BASE[@]}" "${SAME[@]}" \
    --strategy ddp --devices 2 --default-root-dir "$IT_TMP/world3" >"$IT_TMP/world3.out" 2>"$IT_TMP/world3.err"
RC=$?
show_tail "$IT_TMP/world3.err" 2
check "world3: exits 2, a refused config, as under ltrun ($RC)" [ $RC -eq 2 ]
check "world3: says world size 3 against 1 x 2 and the fix" \
    contains "$IT_TMP/world3.err" "reports world size 3 but num_nodes (1) x devices (2) = 2; make them agree"
check "world3: one error line" [ "$(grep -c 'error' "$IT_TMP/world3.err")" -eq 1 ]

# A strategy that runs the job in one process (strategy auto picks
# single_device for devices=1) under a launcher that started 2: every rank
# would train alone and write the same files. Refused before training, like
# garbage in the launcher's variables and single_device asked for 2 devices.
refused() { # refused LABEL "ENV" NEEDLE args...
    local label=$1 envs=$2 needle=$3; shift 3
    env $envs timeout 60 "$LTRUN" "${BASE[@]}" "${SAME[@]}" "$@" --default-root-dir "$IT_TMP/$label" \
        >"$IT_TMP/$label.out" 2>"$IT_TMP/$label.err"
    RC=$?
    show_tail "$IT_TMP/$label.err" 1
    check "$label: exits 2 ($RC)" [ $RC -eq 2 ]
    check "$label: says '$needle'" contains "$IT_TMP/$label.err" "$needle"
    check "$label: one error line" [ "$(grep -c 'error' "$IT_TMP/$label.err")" -eq 1 ]
    check "$label: trained nothing" bash -c "! grep -q 'epoch 0 done' '$IT_TMP/$label.out'"
}
echo "external_launch: one-process strategies under a launcher of 2, bad launcher variables"
refused auto_te "$COMMON_TE RANK=0 LOCAL_RANK=0" \
    "the environment (torchelastic, from the launcher's variables) reports 2 processes (this one rank 0), but strategy 'single_device'"
refused dp_slurm "$COMMON_SLURM SLURM_PROCID=0 SLURM_LOCALID=0" \
    "the environment (slurm, from the launcher's variables) reports 2 processes (this one rank 0), but strategy 'dp'" --strategy dp
refused rank_abc "WORLD_SIZE=2 RANK=abc" "RANK='abc' is not an integer"
refused single2 "" "strategy single_device runs one process on one device, but trainer.devices = 2 (--devices) gives 2" \
    --strategy single_device --devices 2
it_finish
