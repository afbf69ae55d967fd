#!/usr/bin/env python3
"""PyTorch eager peer of lt's gpu accelerator (bench/run_gpu_bench.sh): the
Fashion-MNIST MLP 784-512-512-10 (ReLU) or the CNN example, CrossEntropyLoss,
SGD(lr=0.05, momentum=0.9), float32, on one CUDA device, no torch.compile,
no CUDA graphs: the training loop a user writes.

    python3 bench/gpu_torch.py --model mlp --batch 64,1024 --data device,host

Data: the same gz IDX files lt reads (LT_FASHION_MNIST_DIR or
/usr/share/datasets/fashion-mnist), normalised as lt does, the first 55000
training images; each epoch a fresh permutation, last incomplete batch
dropped (lt's runs drop_last too). Where the batches come from:
  device  the whole set moved to the GPU once; each batch gathered there by
          index (PyTorch's best case: no copy per step)
  host    the set in host memory; each batch gathered on the host and copied
          to the GPU every step (what lt's loader does, and a DataLoader
          without workers)
After --warmup steps, --samples samples are timed: torch.cuda.synchronize()
before the first and after the last step, time.perf_counter() between. One
line per (batch, data), machine-readable:

    torch model=mlp batch=64 data=device samples_per_s=123456 step_ms=0.5184 steps=1718 loss=0.4012 tf32_matmul=0 tf32_cudnn=1

tf32_*: PyTorch's defaults as found (torch.backends.cuda.matmul.allow_tf32,
torch.backends.cudnn.allow_tf32), left as they are unless --strict-fp32.
Exit status 3 (and one line on stderr saying why) when torch has no CUDA.
"""
import argparse
import os
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fmnist_torch import load, make_cnn, make_model  # noqa: E402


def batches(n, batch, gen, device):
    """Endless stream of index tensors (on `device`): a fresh permutation per epoch, drop_last."""
    while True:
        perm = torch.randperm(n, generator=gen).to(device)
        for i in range(0, n - batch + 1, batch):
            yield perm[i:i + batch]


def bench(x, y, batch, samples, warmup, cnn, data, dev):
    torch.manual_seed(42)
    gen = torch.Generator().manual_seed(42)
    model = (make_cnn() if cnn else make_model()).to(dev)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    on_device = data == "device"
    stream = batches(x.shape[0], batch, gen, dev if on_device else "cpu")

    def step(idx):
        if on_device:
            xb, yb = x[idx], y[idx]
        else:
            xb = x[idx].to(dev, non_blocking=True)
            yb = y[idx].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step(next(stream))
    steps = max(1, samples // batch)
    torch.cuda.synchronize(dev)
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step(next(stream))
    torch.cuda.synchronize(dev)
    dt = time.perf_counter() - t0
    return steps * batch / dt, dt / steps, steps, loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
    ap.add_argument("--batch", default="64,1024", help="comma-separated batch sizes")
    ap.add_argument("--data", default="device,host", help="comma-separated: device, host")
    ap.add_argument("--samples", type=int, default=110000, help="timed samples per (batch, data)")
    ap.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--strict-fp32", action="store_true",
                    help="turn TF32 off for matmuls and cuDNN convolutions (default: PyTorch's defaults)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print(f"gpu_torch: torch {torch.__version__} (CUDA build {torch.version.cuda}) sees no CUDA device",
              file=sys.stderr)
        sys.exit(3)
    if args.strict_fp32:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    dev = torch.device(args.device)
    data_dir = os.environ.get("LT_FASHION_MNIST_DIR") or "/usr/share/datasets/fashion-mnist"
    x_host, y_host = load(data_dir)
    modes = [m for m in args.data.split(",") if m]
    for m in modes:
        if m not in ("device", "host"):
            ap.error(f"--data: {m!r} is neither device nor host")
    tf32 = (int(torch.backends.cuda.matmul.allow_tf32), int(torch.backends.cudnn.allow_tf32))
    print(f"# torch {torch.__version__} cuda {torch.version.cuda} cudnn {torch.backends.cudnn.version()} "
          f"device {torch.cuda.get_device_name(dev)} python {sys.executable} data {data_dir} "
          f"samples {x_host.shape[0]} tf32_matmul={tf32[0]} tf32_cudnn={tf32[1]}", flush=True)
    for mode in modes:
        if mode == "device":
            x, y = x_host.to(dev), y_host.to(dev)
        else:
            x, y = x_host, y_host
        for b in (int(s) for s in args.batch.split(",") if s):
            sps, step_s, steps, loss = bench(x, y, b, args.samples, args.warmup,
                                             args.model == "cnn", mode, dev)
            print(f"torch model={args.model} batch={b} data={mode} samples_per_s={sps:.0f} "
                  f"step_ms={step_s * 1e3:.4f} steps={steps} loss={loss:.4f} "
                  f"tf32_matmul={tf32[0]} tf32_cudnn={tf32[1]}", flush=True)


if __name__ == "__main__":
    main()
