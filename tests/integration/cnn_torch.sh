#!/bin/bash
# An independent reference for the CNN: lt trains examples/fashion_mnist/cnn.c
# for 150 steps and evaluates it on the 10000 test images; PyTorch then loads
# lt's checkpoint (safetensors) into the same network written with torch.nn
# (bench/fmnist_torch.py: Conv2d, MaxPool2d, Linear) and evaluates it on the
# same images. The two test accuracies must agree to 1e-4 (at most one image
# in 10000 may flip on rounding): any difference in convolution layout,
# padding, pooling or the weight names would show as a different accuracy.
# Skipped where no python3 has torch and safetensors (pip packages).
source "$(dirname "$0")/common.sh"
it_init cnn_torch "$@"
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c "import torch, safetensors, numpy" 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    it_skip "no python3 with torch, safetensors and numpy (pip install torch safetensors numpy)"
fi
run_ltrun cnn --plugin-dir "$PLUGINS" --config "$SRC/examples/fashion_mnist/cnn.ini" \
    --set model.channels=8 --set model.hidden=32 --max-steps 150 --max-epochs 1 \
    --set trainer.limit_val_batches=0 --set trainer.num_sanity_val_steps=0 \
    --set trainer.enable_progress_bar=false --default-root-dir "$IT_TMP/cnn"
check "lt trains and tests the CNN" [ "$RC" -eq 0 ]
lt_acc=$(sed -n 's/.*test_acc \([0-9.]*\).*/\1/p' "$IT_TMP/cnn.out" | tail -1)
check "lt printed a test accuracy ($lt_acc)" [ -n "$lt_acc" ]
torch_acc=$("$PY" - "$IT_TMP/cnn/checkpoints/last.safetensors" "$SRC/bench" "$DATA" <<'PYEOF' 2>"$IT_TMP/torch.err"
import gzip, os, struct, sys
import numpy as np
import torch
from safetensors.torch import load_file
sys.path.insert(0, sys.argv[2])
from fmnist_torch import make_cnn  # noqa: E402
sd = load_file(sys.argv[1])
net = make_cnn()
# torch.nn.Sequential indices of the layers with parameters, in lt's names
net[1] = torch.nn.Conv2d(1, 8, 3, padding=1)
net[4] = torch.nn.Conv2d(8, 16, 3, padding=1)
net[8] = torch.nn.Linear(16 * 7 * 7, 32)
net[10] = torch.nn.Linear(32, 10)
names = {"1": "conv1", "4": "conv2", "8": "fc1", "10": "fc2"}
net.load_state_dict({f"{i}.{p}": sd[f"{n}.{p}"] for i, n in names.items() for p in ("weight", "bias")})
def idx(path):
    d = gzip.open(path).read()
    magic, n = struct.unpack(">II", d[:8])
    return np.frombuffer(d, np.uint8, offset=16).reshape(n, 784) if magic == 0x803 else np.frombuffer(d, np.uint8, offset=8)
x = idx(os.path.join(sys.argv[3], "t10k-images-idx3-ubyte.gz"))
y = idx(os.path.join(sys.argv[3], "t10k-labels-idx1-ubyte.gz"))
x = torch.from_numpy((x.astype(np.float32) / 255.0 - 0.2860) / 0.3530)
with torch.no_grad():
    print("%.6f" % (net(x).argmax(1).numpy() == y).mean())
PYEOF
)
check "PyTorch evaluated lt's checkpoint ($torch_acc)" [ -n "$torch_acc" ]
[ -n "$torch_acc" ] || show_tail "$IT_TMP/torch.err"
echo "  lt test_acc $lt_acc, PyTorch on lt's weights $torch_acc"
check "the accuracies agree to 1e-4" python3 -c "import sys; sys.exit(abs(float('${lt_acc:-0}') - float('${torch_acc:-1}')) > 1e-4)"
check "and the CNN learned something (> 0.6)" python3 -c "import sys; sys.exit(float('${lt_acc:-0}') <= 0.6)"
it_finish
