#!/usr/bin/env python3
"""Interoperability of lt's safetensors files with the Hugging Face library.

    safetensors_torch.py --run build/tests/test_safetensors   # both directions
    safetensors_torch.py FILE                                  # check a file lt wrote

With --run, the CUnit test writes its sample tensors (LT_ST_INTEROP_OUT), this
script loads them with safetensors.torch (or safetensors.numpy when torch is
missing) and checks every value; then it saves the same tensors with the library
and the CUnit test opens that file (LT_ST_INTEROP_IN) and checks them in C.
Given a FILE it only does the first half.

Exits 0 printing "skipped: ..." when safetensors, or both torch and numpy, are
missing, so ctest can run it everywhere.
"""
import os
import subprocess
import sys
import tempfile

try:
    import safetensors
except ImportError:
    print("skipped: python3 cannot import safetensors (pip install safetensors numpy)")
    sys.exit(0)
try:
    import torch
except ImportError:
    torch = None
try:
    import numpy as np
except ImportError:
    np = None
if torch is None and np is None:
    print("skipped: python3 can import neither torch nor numpy")
    sys.exit(0)

# Mirrors `sample` in tests/unit/io/test_safetensors.c: name -> (dtype, shape, values).
# F16/BF16 values are exactly representable, so equality is exact.
SAMPLE = {
    "layer.0.weight": ("F32", [2, 3], [1.0, -2.5, 3.25, 0.0, 1e-3, 6.0]),
    "layer.0.bias": ("F64", [4], [1.0 / 3, -1e300, 0.0, 42.0]),
    "half": ("F16", [3], [1.0, -2.0, 0.5]),
    "brain": ("BF16", [2, 2], [1.0, -2.0, 3.0, 0.5]),
    "empty": ("F32", [0, 3], []),
    "bytes.signed": ("I8", [5], [-128, -1, 0, 1, 127]),
    "bytes.unsigned": ("U8", [1, 1, 3], [0, 128, 255]),
    "ints": ("I32", [2, 1], [-2**31, 123456]),
    "step": ("I64", [], [-9007199254740993]),
}
META = {"epoch": "3", "note": "lt \u2713 unicode"}

NP_TYPES = {"F32": "float32", "F64": "float64", "F16": "float16", "I8": "int8",
            "U8": "uint8", "I32": "int32", "I64": "int64"}


def expected_np(dtype, shape, values):
    return np.array(values, dtype=NP_TYPES[dtype]).reshape(shape)


def expected_torch(dtype, shape, values):
    tdt = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
           "BF16": torch.bfloat16, "I8": torch.int8, "U8": torch.uint8,
           "I32": torch.int32, "I64": torch.int64}[dtype]
    return torch.tensor(values, dtype=tdt).reshape(shape)


def check_torch(path):
    from safetensors.torch import load_file
    got = load_file(path)
    assert set(got) == set(SAMPLE), f"tensor names {sorted(got)} != {sorted(SAMPLE)}"
    for name, spec in SAMPLE.items():
        want = expected_torch(*spec)
        t = got[name]
        assert t.dtype == want.dtype and list(t.shape) == spec[1], f"{name}: {t.dtype} {list(t.shape)}"
        assert torch.equal(t, want), f"{name}: {t} != {want}"


def check_numpy(path):
    """numpy has no bfloat16: load the rest through safe_open, and check the
    BF16 tensor's raw bits through the library's framework-free deserializer."""
    from safetensors import safe_open
    with safe_open(path, framework="np") as f:
        names = set(f.keys())
        assert names == set(SAMPLE), f"tensor names {sorted(names)} != {sorted(SAMPLE)}"
        for name, (dtype, shape, values) in SAMPLE.items():
            if dtype == "BF16":
                continue
            a, want = f.get_tensor(name), expected_np(dtype, shape, values)
            assert a.dtype == want.dtype and list(a.shape) == shape, f"{name}: {a.dtype} {a.shape}"
            assert np.array_equal(a, want), f"{name}: {a} != {want}"
    with open(path, "rb") as fh:
        raw = dict(safetensors.deserialize(fh.read()))
    bf = raw["brain"]
    assert bf["dtype"] == "BF16" and list(bf["shape"]) == [2, 2], bf
    bits = np.frombuffer(bytes(bf["data"]), dtype="<u2")
    assert list(bits) == [0x3F80, 0xC000, 0x4040, 0x3F00], [hex(b) for b in bits]


def check_metadata(path):
    from safetensors import safe_open
    with safe_open(path, framework="pt" if torch is not None else "np") as f:
        assert f.metadata() == META, f.metadata()


def check_lt_file(path):
    (check_torch if torch is not None else check_numpy)(path)
    check_metadata(path)


def save_with_library(path):
    """Writes SAMPLE the way a PyTorch user would (numpy cannot hold BF16, so a
    numpy-only run leaves that tensor out; the C side accepts its absence)."""
    if torch is not None:
        from safetensors.torch import save_file
        save_file({n: expected_torch(*s) for n, s in SAMPLE.items()}, path, metadata=META)
    else:
        from safetensors.numpy import save_file
        save_file({n: expected_np(*s) for n, s in SAMPLE.items() if s[0] != "BF16"},
                  path, metadata=META)


def run_test(binary, **env):
    r = subprocess.run([binary], env={**os.environ, **env}, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout + r.stderr)
        raise SystemExit(f"FAIL: {binary} exited {r.returncode} with {env}")


def main(argv):
    if len(argv) == 3 and argv[1] == "--run":
        with tempfile.TemporaryDirectory() as d:
            ours, theirs = os.path.join(d, "lt.safetensors"), os.path.join(d, "py.safetensors")
            run_test(argv[2], LT_ST_INTEROP_OUT=ours)
            check_lt_file(ours)
            save_with_library(theirs)
            run_test(argv[2], LT_ST_INTEROP_IN=theirs)
    elif len(argv) == 2 and not argv[1].startswith("-"):
        check_lt_file(argv[1])
    else:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    lib = "torch" if torch is not None else "numpy"
    print(f"ok: safetensors {safetensors.__version__} via {lib} agrees with lt")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
