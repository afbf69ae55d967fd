#!/usr/bin/env python3
"""Rewrites safetensors files by hand, with the standard library only (the
format: an 8-byte little-endian header length, a JSON header, the tensors'
bytes), so checkpoint_faults.sh needs no safetensors package:

  st_edit.py weights IN OUT     the parameters of IN without any metadata and
                                without lt's optimizer state: what
                                safetensors.torch.save_file(model.state_dict(), OUT)
                                writes
  st_edit.py add IN OUT NAME    IN (metadata kept) plus an F32 tensor NAME, shape [3]
  st_edit.py drop IN OUT NAME   IN (metadata kept) without tensor NAME
  st_edit.py meta IN KEY        prints IN's metadata value KEY ("" if absent)
  st_edit.py setmeta IN OUT KEY VALUE   IN with metadata KEY set to VALUE
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    data = b[8 + n:]
    tensors = {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
               for k, v in header.items()}
    return tensors, meta


def write(path, tensors, meta):
    header = {} if meta is None else {"__metadata__": meta}
    blobs, at = [], 0
    # Sorted by name as the safetensors library does among equal dtypes (all
    # F32 here, so every tensor stays 4-byte aligned).
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.write(b"".join(blobs))


def main(argv):
    if len(argv) == 4 and argv[1] == "meta":
        print((read(argv[2])[1] or {}).get(argv[3], ""))
        return
    if len(argv) == 6 and argv[1] == "setmeta":
        tensors, meta = read(argv[2])
        meta = dict(meta or {})
        meta[argv[4]] = argv[5]
        write(argv[3], tensors, meta)
        return
    if len(argv) < 4 or argv[1] not in ("weights", "add", "drop") or (argv[1] != "weights") != (len(argv) == 5):
        sys.exit(__doc__)
    tensors, meta = read(argv[2])
    if argv[1] == "weights":
        tensors = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
        meta = None
    elif argv[1] == "add":
        tensors[argv[4]] = ("F32", [3], struct.pack("<3f", 1.0, 2.0, 3.0))
    elif argv[4] not in tensors:
        sys.exit("%s has no tensor %s" % (argv[2], argv[4]))
    else:
        del tensors[argv[4]]
    write(argv[3], tensors, meta)


if __name__ == "__main__":
    main(sys.argv)
