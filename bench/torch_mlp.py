#!/usr/bin/python3
"""PyTorch peer of bench/train_bench.c: the Fashion-MNIST MLP 784-512-512-10
(ReLU), or with --model cnn the CNN example, CrossEntropyLoss,
SGD(lr=0.05, momentum=0.9), one thread.

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13), not a
pyenv python3 on PATH:

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 bench/torch_mlp.py --batch 64,256,1024

Data: the same gz IDX files lt reads (LT_FASHION_MNIST_DIR or
/usr/share/datasets/fashion-mnist), normalised the same way
((x/255 - 0.2860) / 0.3530), the first 55000 training images (lt holds out
5000 for validation), pre-loaded as tensors; each epoch a fresh permutation,
batches gathered by index, last incomplete batch dropped (lt runs drop_last
too). After a warm-up of --warmup steps, --samples samples are timed with
time.perf_counter(); prints one machine-readable line per batch size:

    torch batch=64 samples_per_s=16123 step_ms=3.969 cpu_step_ms=3.95 steps=1718 loss=0.4012 precision=32-true

(cpu_step_ms: process CPU time per step; a wall step_ms well above it means
other work took the core.)

--autocast bf16 (or fp16) runs each step's forward and loss under
torch.autocast("cpu", dtype=torch.bfloat16), the backward outside it, with
fp32 parameters and SGD: PyTorch's recipe for mixed precision on a CPU, the
peer of lt's bf16-mixed. The line then ends precision=bf16-autocast
(fp16-autocast); fp32 runs say precision=32-true. bench/run_precision_bench.sh
runs both beside lt's precision plugins.
"""
import argparse
import os
import sys
import time

# Before torch (and its OpenBLAS / OpenMP) load.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from fmnist_torch import load, make_cnn, make_model  # noqa: E402

# --autocast NAME: the dtype torch.autocast runs the forward in (None: no autocast),
# and the precision= tag of the output line (lt's names where they mean the same).
AUTOCAST = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}
PRECISION_TAG = {"none": "32-true", "bf16": "bf16-autocast", "fp16": "fp16-autocast"}


def batches(n, batch, gen):
    """Endless stream of index tensors: a fresh permutation per epoch, drop_last."""
    while True:
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n - batch + 1, batch):
            yield perm[i:i + batch]


def bench(x, y, batch, samples, warmup, cnn=False, autocast=None):
    torch.manual_seed(42)
    gen = torch.Generator().manual_seed(42)
    model = make_cnn() if cnn else make_model()
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    stream = batches(x.shape[0], batch, gen)

    def step(idx):
        xb, yb = x[idx], y[idx]
        opt.zero_grad(set_to_none=True)
        if autocast is None:
            loss = loss_fn(model(xb), yb)
        else:  # forward and loss under autocast, backward outside it (as torch's docs do)
            with torch.autocast("cpu", dtype=autocast):
                loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step(next(stream))
    steps = max(1, samples // batch)
    c0, t0 = time.process_time(), time.perf_counter()
    for _ in range(steps):
        loss = step(next(stream))
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    return steps * batch / dt, dt / steps, dc / steps, steps, loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", default="64,256,1024", help="comma-separated batch sizes")
    ap.add_argument("--samples", type=int, default=110000, help="timed samples per batch size")
    ap.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp",
                    help="mlp: 784-512-512-10; cnn: the CNN of examples/fashion_mnist/cnn.c")
    ap.add_argument("--autocast", choices=sorted(AUTOCAST), default="none",
                    help="none: fp32 throughout; bf16 / fp16: forward and loss under "
                         "torch.autocast('cpu', dtype=...), fp32 parameters and optimizer")
    args = ap.parse_args()
    autocast = AUTOCAST[args.autocast]
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    data_dir = os.environ.get("LT_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"
    x, y = load(data_dir)
    print(f"# torch {torch.__version__} threads={torch.get_num_threads()} python={sys.executable} "
          f"data={data_dir} samples={x.shape[0]}", flush=True)
    for b in (int(s) for s in args.batch.split(",") if s):
        sps, step_s, cpu_s, steps, loss = bench(x, y, b, args.samples, args.warmup,
                                                args.model == "cnn", autocast)
        tag = "torch model=cnn" if args.model == "cnn" else "torch"
        print(f"{tag} batch={b} samples_per_s={sps:.0f} step_ms={step_s * 1e3:.4f} "
              f"cpu_step_ms={cpu_s * 1e3:.4f} steps={steps} loss={loss:.4f} "
              f"precision={PRECISION_TAG[args.autocast]}", flush=True)


if __name__ == "__main__":
    main()
