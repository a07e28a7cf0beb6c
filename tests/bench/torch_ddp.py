#!/usr/bin/python3
"""PyTorch DistributedDataParallel (gloo) baseline for train_bench.sh.

PROCS processes on one host train the MLP 784-256-256-10 with DDP over
gloo; GLOBAL_BATCH is split evenly (GLOBAL_BATCH / PROCS per process), as
graphrun's mirrored and multi-worker mirrored runs split it. Each process
has one torch thread and reads its shard of Fashion-MNIST held in memory.
Rank 0 prints one JSON line with the job's examples/s (global batch x
steps / seconds) over SECONDS after a warm-up.

usage: torch_ddp.py GLOBAL_BATCH [SECONDS=5] [PROCS=2] [OPTIMIZER=adam]
"""
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlp import DATA, read_idx  # noqa: E402

import numpy as np  # noqa: E402


def worker(rank, procs, batch, seconds, optimizer, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=procs)
    x = torch.from_numpy(read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))
                         .reshape(-1, 784).astype(np.float32) / 255.0)[rank::procs].contiguous()
    y = torch.from_numpy(read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))
                         .astype(np.int64))[rank::procs].contiguous()
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10)))
    opt = (torch.optim.Adam(model.parameters(), lr=1e-3) if optimizer == "adam"
           else torch.optim.SGD(model.parameters(), lr=0.1))
    loss_fn = torch.nn.CrossEntropyLoss()
    local = batch // procs
    n = x.shape[0] // local * local

    def step(i):
        j = (i * local) % n
        opt.zero_grad()
        loss_fn(model(x[j:j + local]), y[j:j + local]).backward()
        opt.step()

    for i in range(20):
        step(i)
    dist.barrier()
    steps, start = 0, time.perf_counter()
    # Every rank runs the same number of steps: rank 0 decides when to stop.
    stop = torch.zeros(1)
    while True:
        step(steps)
        steps += 1
        if steps % 20 == 0:
            stop[0] = 1.0 if rank == 0 and time.perf_counter() - start >= seconds else 0.0
            dist.broadcast(stop, 0)
            if stop[0] > 0:
                break
    eps = steps * batch / (time.perf_counter() - start)
    if rank == 0:
        print(json.dumps({"framework": "torch-ddp-gloo", "model": "mlp", "batch": batch,
                          "procs": procs, "optimizer": optimizer,
                          "examples_per_sec": round(eps, 1)}), flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    batch = int(sys.argv[1])
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    procs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    optimizer = sys.argv[4] if len(sys.argv) > 4 else "adam"
    mp.spawn(worker, args=(procs, batch, seconds, optimizer, free_port()), nprocs=procs, join=True)
