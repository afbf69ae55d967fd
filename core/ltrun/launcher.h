/* ltrun's launcher, like torchrun or Lightning's subprocess launcher: on
 * node 0 it hosts the rendezvous store; on every node it starts one worker
 * per device by executing this same program again with the rank variables
 * set, watches them, stops the whole group when one fails, and restarts it
 * from the last checkpoint when --max-restarts allows.
 *
 * Workers get: MASTER_ADDR, MASTER_PORT, WORLD_SIZE (= nproc_per_node x
 * num_nodes), RANK (= node_rank x nproc_per_node + LOCAL_RANK), LOCAL_RANK,
 * NODE_RANK, GROUP_RANK, LOCAL_WORLD_SIZE, LT_GLOBAL_SEED, LT_RESTART_COUNT,
 * LT_STATUS_FD (a memfd of nproc_per_node lt_status_slot, see launch.h),
 * LT_RDZV_TOKEN (the user's; on one node a random one when the user set none)
 * and, unless already set, OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = max(1,
 * usable cores / nproc_per_node).
 *
 * Seed: trainer.seed, else $LT_GLOBAL_SEED, else node 0 picks one from the
 * clock and pid and publishes it in the store (key "ltrun/seed"); the other
 * nodes' launchers read it from there, so every rank of every node shuffles
 * alike.
 *
 * Restarts (launcher.max_restarts): node 0 resumes from
 * <ckpt_dir>/last.safetensors when this launch wrote it (its mtime is after
 * the launcher started; an older file is someone else's), otherwise it starts
 * over (from the user's --ckpt-path, if any). It publishes that choice under
 * "ltrun/resume/<n>" and the other nodes follow it, so checkpoint.dirpath
 * must be on a shared file system for multi-node restarts. Each node
 * restarts its own workers: a failure on one node reaches the others as a
 * failed collective, which fails their workers in turn.
 *
 * Failures: the first worker to exit non-zero or by a signal is reported in
 * one line on stderr ("ltrun: rank 1 (host h, pid 42) was killed by signal 9
 * (Killed) at step 57 (epoch 0); stopped the other ranks", step and epoch from
 * its status slot); the others get SIGTERM, then SIGKILL 3 s later, all
 * reaped within 5 s. A worker that dies of the ^C ltrun also got is not a
 * failure (no report, no restart).
 *
 * Elastic nodes (launcher.nnodes = "MIN:MAX", --nnodes 1:4): elastic.c
 * instead of the fixed loop: the node count, node ranks, MASTER_ADDR (the
 * rdzv endpoint) and the resume point change from round to round; see its
 * header.
 *
 * Exit status: 0 when every worker exits 0; 2 when the reported failure is
 * a worker that exited 2 (it refused its configuration or input: main.c);
 * 1 for any other failure: a worker that exits with another status or is
 * killed by a signal (the report names the rank and the signal), or the
 * launcher itself failing (store, seed, fork); 130 / 143 / 129 when ltrun
 * itself gets SIGINT / SIGTERM / SIGHUP (passed on to every worker first),
 * as a shell reports a command it interrupted. Workers die with the
 * launcher (PR_SET_PDEATHSIG), so none is ever left behind. */
#ifndef LTRUN_LAUNCHER_H
#define LTRUN_LAUNCHER_H

#include "trainer/launch_info.h"

/* Runs the whole job and returns ltrun's exit status. argv is ltrun's own,
 * NULL-terminated; workers get it unchanged (plus --ckpt-path on a resume).
 * Called from main only, with no other threads running. Once it starts
 * workers it blocks SIGINT, SIGTERM, SIGHUP (those not ignored when it is
 * called: nohup's SIGHUP and a background job's SIGINT stay ignored, for the
 * workers too) and SIGCHLD, and takes them in its supervision loop; it
 * restores the mask before returning. */
int ltrun_launch(const lt_launch_info *info, char **argv);

#endif
