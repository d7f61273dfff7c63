"""The benchmark workloads of `eddy bench` written for PyTorch, printing the same JSON object.

    python3 compare/torch_bench.py --device cuda [--only KEY,...]

Each workload mirrors its Eddy twin in src/bench.rs: the same shapes, iteration counts, sync
points and medians, so the two JSON objects can be read side by side on one host.
"""

import argparse
import json
import statistics
import time

import torch


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reps(n, f, warm=1):
    for _ in range(warm):
        f()
    return [f() for _ in range(n)]


def dispatch_small(dev):
    x = torch.ones(16, device=dev)

    def one():
        y = torch.zeros(16, device=dev)
        sync(dev)
        t = time.perf_counter()
        for _ in range(10_000):
            y = y + x
        sync(dev)
        ns = (time.perf_counter() - t) * 1e9 / 10_000
        assert y[0].item() == 10_000.0
        return ns

    return reps(7, one)


def dispatch_mixed(dev):
    x = torch.full((64,), 1.0 / 64.0, device=dev)

    def one():
        y = torch.ones(64, device=dev)
        sync(dev)
        t = time.perf_counter()
        for _ in range(2_500):
            y = y + x
            y = y * x
            y = torch.relu(y)
            y = y.sum().expand(64)
        sync(dev)
        return (time.perf_counter() - t) * 1e9 / 10_000

    return reps(7, one)


def add_large(dev):
    n = 16 << 20
    a = torch.rand(n, device=dev)
    b = torch.rand(n, device=dev)
    c = a + b
    sync(dev)

    def one():
        nonlocal c
        t = time.perf_counter()
        for _ in range(10):
            c = a + b
        sync(dev)
        return 3.0 * n * 4 * 10 / (time.perf_counter() - t) / 1e9

    return reps(7, one, warm=2)


def copy_large(dev):
    n = 16 << 20
    a = torch.rand(n, device=dev)
    c = torch.zeros(n, device=dev)
    c.copy_(a)
    sync(dev)

    def one():
        t = time.perf_counter()
        for _ in range(10):
            c.copy_(a)
        sync(dev)
        return 2.0 * n * 4 * 10 / (time.perf_counter() - t) / 1e9

    return reps(7, one)


def matmul(dev, n, dtype=torch.float32):
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    (a @ b)
    sync(dev)
    t = time.perf_counter()
    (a @ b)
    sync(dev)
    iters = max(1, min(10_000, int(0.25 / max(time.perf_counter() - t, 1e-6))))

    def one():
        t = time.perf_counter()
        for _ in range(iters):
            c = a @ b
        sync(dev)
        return 2.0 * n**3 * iters / (time.perf_counter() - t) / 1e9

    return reps(7, one)


def mlp(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    ).to(dev)


def mlp_train(dev):
    model = mlp(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 784, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step().item()
    times = []
    first = last = None
    for i in range(50):
        t = time.perf_counter()
        v = step().item()
        times.append((time.perf_counter() - t) * 1e3)
        first = v if i == 0 else first
        last = v
    return times, first, last


def mlp_infer(dev):
    model = mlp(dev)
    x = torch.randn(1, 784, device=dev)

    def one():
        with torch.no_grad():
            t = time.perf_counter()
            for _ in range(300):
                model(x)
                sync(dev)
            return (time.perf_counter() - t) * 1e6 / 300

    return reps(7, one)


def cnn_train(dev):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 7 * 7, 10),
    ).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (64,), device=dev)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(5):
        step().item()
    times = []
    for _ in range(50):
        t = time.perf_counter()
        step().item()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def conv2d_3x3(dev):
    x = torch.randn(8, 64, 56, 56, device=dev)
    w = torch.randn(64, 64, 3, 3, device=dev) * 0.1
    flop = 2.0 * 8 * 56 * 56 * 64 * 64 * 9
    torch.nn.functional.conv2d(x, w, padding=1)
    sync(dev)

    def one():
        t = time.perf_counter()
        for _ in range(4):
            torch.nn.functional.conv2d(x, w, padding=1)
            sync(dev)
        return flop * 4 / (time.perf_counter() - t) / 1e9

    return reps(7, one)


class CharTransformer(torch.nn.Module):
    """Eddy's `models::CharTransformer` (the same `state_dict` names): token embedding plus
    learned positions, pre-norm causal blocks, a final norm and a linear head."""

    def __init__(self, vocab=256, d=128, heads=4, layers=2, ffn=512, seq=64):
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
        mask = torch.nn.Transformer.generate_square_subsequent_mask(n, device=ids.device)
        for layer in self.layers:
            x = layer(x, src_mask=mask, is_causal=True)
        return self.head(self.norm(x)).reshape(-1, self.vocab)


def transformer_train(dev):
    torch.manual_seed(0)
    model = CharTransformer().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    ids = torch.randint(0, 256, (16, 65), device=dev)
    x, y = ids[:, :64].contiguous(), ids[:, 1:].reshape(-1)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    for _ in range(5):
        step()
    times = []
    for _ in range(30):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    return times


def attention_fwd(dev):
    q, k, v = (torch.randn(16, 4, 64, 32, device=dev) for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention
    sdpa(q, k, v, is_causal=True)
    sync(dev)

    def one():
        t = time.perf_counter()
        for _ in range(20):
            sdpa(q, k, v, is_causal=True)
            sync(dev)
        return (time.perf_counter() - t) * 1e6 / 20

    return reps(7, one)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--only", default="")
    a = p.parse_args()
    dev = torch.device(a.device)
    only = [k for k in a.only.split(",") if k]
    want = lambda k: not only or k in only
    samples = {}
    if want("dispatch_small_ns_per_op"):
        samples["dispatch_small_ns_per_op"] = dispatch_small(dev)
    if want("dispatch_mixed_ns_per_op"):
        samples["dispatch_mixed_ns_per_op"] = dispatch_mixed(dev)
    if want("add_large_gbps"):
        samples["add_large_gbps"] = add_large(dev)
    for n in (256, 512, 1024):
        if want(f"matmul_{n}_gflops"):
            samples[f"matmul_{n}_gflops"] = matmul(dev, n)
    if dev.type == "cuda" and want("copy_large_gbps"):
        samples["copy_large_gbps"] = copy_large(dev)
    if dev.type == "cuda":
        for name, dt in (("f16", torch.float16), ("bf16", torch.bfloat16)):
            k = f"matmul_4096_{name}_tflops"
            if want(k):
                samples[k] = [g / 1e3 for g in matmul(dev, 4096, dt)]
    if want("mlp_train_ms_per_step"):
        times, first, last = mlp_train(dev)
        samples["mlp_train_ms_per_step"] = times
        samples["mlp_train_loss_first"] = [first]
        samples["mlp_train_loss_last"] = [last]
    if want("mlp_infer_us_per_fwd"):
        samples["mlp_infer_us_per_fwd"] = mlp_infer(dev)
    if want("cnn_train_ms_per_step"):
        samples["cnn_train_ms_per_step"] = cnn_train(dev)
    if want("conv2d_3x3_gflops"):
        samples["conv2d_3x3_gflops"] = conv2d_3x3(dev)
    if want("transformer_train_ms_per_step"):
        samples["transformer_train_ms_per_step"] = transformer_train(dev)
    if want("attention_fwd_us"):
        samples["attention_fwd_us"] = attention_fwd(dev)
    metrics = {k: statistics.median(v) for k, v in samples.items()}
    print(json.dumps({
        "metrics": metrics,
        "samples": samples,
        "meta": {"framework": f"torch {torch.__version__}", "device": str(dev)},
    }, indent=1))


if __name__ == "__main__":
    main()
