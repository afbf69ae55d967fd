#!/usr/bin/python3
"""PyTorch DistributedDataParallel over gloo: the peer of lt's ddp strategy on
the Fashion-MNIST MLP 784-512-512-10 (ReLU), CrossEntropyLoss,
SGD(lr=0.05, momentum=0.9), one thread per rank.

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13), not a
pyenv python3 on PATH:

    /usr/bin/python3 bench/torch_ddp.py --world 2 --batch 64,512

--world N starts N processes (torch.multiprocessing, spawn) on 127.0.0.1 with
a free port, each with torch.set_num_threads(1), wrapped in
DistributedDataParallel (gloo, default buckets). --world 1 runs one process
with the plain model (no DDP, no process group): the 1-rank baseline.

Data: the gz IDX files lt reads (LT_FASHION_MNIST_DIR or
/usr/share/datasets/fashion-mnist), normalised (x/255 - 0.2860) / 0.3530, the
first 55000 training images (lt holds out 5000 for validation), pre-loaded as
tensors. Sharding is DistributedSampler's: each epoch one permutation seeded
by seed + epoch, the same on every rank, padded to a multiple of world, rank r
taking positions r, r + world, ...; batches of --batch per rank, last
incomplete batch dropped.

Timing: --warmup steps untimed, then one epoch's worth of steps
(55000 / (batch * world), like one lt epoch) between two barriers; prints one
machine-readable line per batch size (samples/s total over ranks):

    torch_ddp world=2 batch=64 samples_per_s=12345 step_ms=10.37 steps=429 loss=0.41 cpu_step_ms=...

--first-step (bench/run_startup_bench.sh): no warm-up, no timing; each rank
takes one optimizer step on the first --batch size and prints on stderr, as
lt's trainer does at debug level,

    [rank 0] first optimizer step done at 1795500234.939862 (unix time) maxrss_kb=251234

(time.time() right after opt.step() returns; maxrss_kb: the rank's own
ru_maxrss at that point), then exits.
"""
import argparse
import os
import resource
import socket
import sys
import time

# Before torch (and its OpenBLAS / OpenMP) load; inherited by spawned ranks.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402

from fmnist_torch import TRAIN_SAMPLES, load, make_model  # noqa: E402


def shard_batches(n, batch, rank, world, seed):
    """Endless stream of this rank's index batches, as DistributedSampler
    (shuffle=True, drop_last=False) feeding a DataLoader with drop_last=True."""
    epoch = 0
    while True:
        g = torch.Generator().manual_seed(seed + epoch)
        perm = torch.randperm(n, generator=g)
        total = -(-n // world) * world
        if total > n:
            perm = torch.cat([perm, perm[:total - n]])
        mine = perm[rank:total:world]
        for i in range(0, mine.numel() - batch + 1, batch):
            yield mine[i:i + batch]
        epoch += 1


def set_threads():
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass


def run(rank, world, port, batches, warmup, data_dir, out_q, first_step=False):
    set_threads()
    if world > 1:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world)
    x, y = load(data_dir)
    for b in batches:
        torch.manual_seed(42)
        model = make_model()
        if world > 1:
            model = nn.parallel.DistributedDataParallel(model)
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        stream = shard_batches(x.shape[0], b, rank, world, 42)

        def step(idx):
            xb, yb = x[idx], y[idx]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            return loss

        if first_step:  # start-up bench: one step, its wall-clock time, then out
            step(next(stream))
            now = time.time()
            line = (f"[rank {rank}] first optimizer step done at {now:.6f} (unix time) "
                    f"maxrss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\n")
            os.write(2, line.encode())  # one write: the ranks' lines do not interleave
            break
        for _ in range(warmup):
            step(next(stream))
        steps = max(1, TRAIN_SAMPLES // (b * world))
        if world > 1:
            dist.barrier()
        c0, t0 = time.process_time(), time.perf_counter()
        for _ in range(steps):
            loss = step(next(stream))
        if world > 1:
            dist.barrier()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if rank == 0:
            out_q.put(f"torch_ddp world={world} batch={b} samples_per_s={steps * b * world / dt:.0f} "
                      f"step_ms={dt / steps * 1e3:.4f} cpu_step_ms={dc / steps * 1e3:.4f} "
                      f"steps={steps} loss={float(loss):.4f}")
        del model, opt
    if world > 1:
        dist.destroy_process_group()


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Printer:
    """The 1-rank path runs in this process: print at once."""

    def put(self, line):
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=2, help="ranks (processes); 1 = no DDP")
    ap.add_argument("--batch", default="64,512", help="comma-separated batch sizes per rank")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    ap.add_argument("--first-step", action="store_true",
                    help="one step on the first batch size; each rank prints on stderr when its "
                         "first optimizer.step() returned (unix time) and its peak RSS, then exits")
    args = ap.parse_args()
    data_dir = os.environ.get("LT_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"
    batches = [int(s) for s in args.batch.split(",") if s]
    print(f"# torch {torch.__version__} world={args.world} threads/rank=1 python={sys.executable} "
          f"data={data_dir}", flush=True)
    if args.world == 1:
        run(0, 1, 0, batches, args.warmup, data_dir, _Printer(), args.first_step)
        return
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=run, args=(r, args.world, port, batches, args.warmup, data_dir, q,
                                           args.first_step))
             for r in range(args.world)]
    for p in procs:
        p.start()
    status = 0
    while any(p.is_alive() for p in procs):
        for p in procs:
            p.join(0.2)
            if p.exitcode not in (None, 0):  # a dead rank leaves the others blocked in gloo
                status = 1
                for o in procs:
                    if o.is_alive():
                        o.terminate()
    while not q.empty():
        print(q.get(), flush=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
