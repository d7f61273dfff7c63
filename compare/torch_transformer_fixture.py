#!/usr/bin/env python3
"""PyTorch's side of the transformer differential test (`tests/transformer_differential.rs`).

Builds `eddy::models::CharTransformer` of the default config as PyTorch writes it (the same
`state_dict` names: `nn.TransformerEncoderLayer` with `norm_first`, GELU and a causal mask),
initialised by PyTorch under seed 0, writes that initial state as a safetensors file, trains it
with AdamW (lr 1e-3, weight decay 0.01) on a batch both sides compute from a formula, and
records each step's loss. Eddy's test loads the file and must reach the same losses. Rerun
when PyTorch changes:

    python3 compare/torch_transformer_fixture.py
"""

import json
import os

import torch

from torch_bench import CharTransformer  # the model of the benchmark, the same names
from torch_cnn_fixture import save_safetensors

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "parity", "transformer")
BATCH, SEQ, STEPS, LR = 4, 64, 8, 1e-3


def batch():
    """ids[b][t] = (7b + 13t + t² mod 5) mod 256 for t in 0..=SEQ; inputs the first SEQ, targets the last."""
    ids = torch.tensor([[(7 * b + 13 * t + (t * t) % 5) % 256 for t in range(SEQ + 1)]
                        for b in range(BATCH)])
    return ids[:, :SEQ].contiguous(), ids[:, 1:].reshape(-1)


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model = CharTransformer()
    os.makedirs(OUT, exist_ok=True)
    save_safetensors(model.state_dict(), os.path.join(OUT, "init.safetensors"))
    x, y = batch()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with open(os.path.join(OUT, "losses.json"), "w") as f:
        json.dump({"torch": torch.__version__, "batch": BATCH, "seq": SEQ, "lr": LR,
                   "weight_decay": 0.01, "losses": losses}, f, indent=1)
        f.write("\n")
    print(f"{STEPS} losses from PyTorch {torch.__version__}: {losses[0]:.6f} .. {losses[-1]:.6f}")


if __name__ == "__main__":
    main()
