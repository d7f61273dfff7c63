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
import struct

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "parity", "transformer")
BATCH, SEQ, STEPS, LR = 4, 64, 8, 1e-3


def batch():
    """ids[b][t] = (7b + 13t + t² mod 5) mod 256 for t in 0..=SEQ; inputs the first SEQ, targets the last."""
    ids = torch.tensor([[(7 * b + 13 * t + (t * t) % 5) % 256 for t in range(SEQ + 1)]
                        for b in range(BATCH)])
    return ids[:, :SEQ].contiguous(), ids[:, 1:].reshape(-1)


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


class CharTransformer(torch.nn.Module):
    def __init__(self, vocab=256, d=128, heads=4, layers=2, ffn=512, seq=SEQ):
        super().__init__()
        self.tok_emb = torch.nn.Embedding(vocab, d)
        self.pos_emb = torch.nn.Parameter(torch.randn(seq, d) * 0.02)
        self.layers = torch.nn.ModuleList(
            torch.nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)
        self.vocab = vocab

    def forward(self, ids):
        n = ids.shape[1]
        x = self.tok_emb(ids) + self.pos_emb[:n]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(n)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x)).reshape(-1, self.vocab)


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
