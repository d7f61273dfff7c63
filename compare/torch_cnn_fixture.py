#!/usr/bin/env python3
"""PyTorch's side of the CNN differential test (`tests/cnn_differential.rs`).

Builds the CNN of `eddy::models::cnn(28, 10)` as PyTorch writes it (the same `state_dict`
names), initialised by PyTorch under seed 0, writes that initial state as a safetensors file,
trains it with SGD (lr 0.1) on a batch both sides compute from a formula, and records each
step's loss. Eddy's test loads the file and must reach the same losses. Rerun when PyTorch
changes:

    python3 compare/torch_cnn_fixture.py
"""

import json
import math
import os
import struct

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "parity", "cnn")
BATCH, STEPS, LR = 16, 12, 0.1


def batch():
    """x[i] = sin(0.1 i) over [BATCH, 1, 28, 28] (computed in f64, stored f32); y[n] = 7n mod 10."""
    n = BATCH * 28 * 28
    x = torch.tensor([math.sin(0.1 * i) for i in range(n)], dtype=torch.float64)
    x = x.float().reshape(BATCH, 1, 28, 28)
    y = torch.tensor([(7 * k) % 10 for k in range(BATCH)])
    return x, y


def save_safetensors(tensors, path):
    """The safetensors format by hand: an 8-byte header length, a JSON header, the data."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = struct.pack(f"<{t.numel()}f", *t.detach().reshape(-1).tolist())
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = torch.nn.Sequential(
        torch.nn.Unflatten(1, (1, 28, 28)),
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10),
    )
    os.makedirs(OUT, exist_ok=True)
    save_safetensors(model.state_dict(), os.path.join(OUT, "init.safetensors"))
    x, y = batch()
    x = x.reshape(BATCH, 28 * 28)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with open(os.path.join(OUT, "losses.json"), "w") as f:
        json.dump({"torch": torch.__version__, "batch": BATCH, "lr": LR, "losses": losses}, f, indent=1)
        f.write("\n")
    print(f"{STEPS} losses from PyTorch {torch.__version__}: {losses[0]:.6f} .. {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
