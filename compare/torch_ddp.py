"""`dp_train_ms_per_step` for PyTorch: the benchmark MLP (784-512-512-10, SGD lr 0.01) under
DistributedDataParallel over gloo, in 2 processes of 1 thread each, 64 of the 128 rows in each;
5 warm-up steps, then the median of 50, each synced on the loss. Run it beside

    mpirun -np 2 eddy bench --json --only dp_train_ms_per_step

    python3 compare/torch_ddp.py [--processes 2]

Prints the JSON object `eddy bench` prints (rank 0 only).
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, n, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=n)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 10),
    )
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(128, 784)
    y = torch.randint(0, 10, (128,))
    rows = 128 // n
    x, y = x[rank * rows:(rank + 1) * rows], y[rank * rows:(rank + 1) * rows]

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
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
    if rank == 0:
        out.put(times)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--port", type=int, default=29517)
    a = p.parse_args()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, a.processes, a.port, out)) for r in range(a.processes)]
    for q in procs:
        q.start()
    times = out.get()
    for q in procs:
        q.join()
    print(json.dumps({
        "framework": "pytorch-ddp",
        "meta": {"version": torch.__version__, "ranks": a.processes, "backend": "gloo", "threads": 1},
        "metrics": {"dp_train_ms_per_step": statistics.median(times)},
        "samples": {"dp_train_ms_per_step": times},
    }))


if __name__ == "__main__":
    main()
