"""Fashion-MNIST and the models, shared by the PyTorch benchmarks: the same data,
normalisation and models lt trains (examples/fashion_mnist: mlp.c, cnn.c)."""
import gzip
import os
import struct

import numpy as np
import torch
from torch import nn

TRAIN_SAMPLES = 55000


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(n, rows * cols)
    if magic == 0x801:
        return np.frombuffer(data, dtype=np.uint8, offset=8)
    raise ValueError(f"{path}: bad IDX magic {magic:#x}")


def load(data_dir):
    x = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))[:TRAIN_SAMPLES]
    y = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))[:TRAIN_SAMPLES]
    x = (x.astype(np.float32) / 255.0 - 0.2860) / 0.3530
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y.astype(np.int64))


def make_model():
    return nn.Sequential(
        nn.Linear(784, 512), nn.ReLU(),
        nn.Linear(512, 512), nn.ReLU(),
        nn.Linear(512, 10))


class ToImage(nn.Module):
    """[N, 784] -> [N, 1, 28, 28], as lt_reshape in cnn.c."""

    def forward(self, x):
        return x.view(-1, 1, 28, 28)


def make_cnn():
    return nn.Sequential(
        ToImage(),
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, 10))
