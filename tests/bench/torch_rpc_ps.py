#!/usr/bin/python3
"""PyTorch RPC parameter-server baseline: 1 PS + N workers (default 2).

The comparison point for `graphrun train` with 1 PS + 2 workers: the same
MLP 784-256-256-10 on Fashion-MNIST held in memory, asynchronous updates.
The PS process owns the parameters and an optimizer; each worker process
fetches the current parameters over RPC (TensorPipe on loopback), computes
gradients on its own shard of the data, and sends them back; the PS applies
them as they arrive (no locking across workers beyond a per-step mutex).
Prints one JSON line: whole-cluster examples/s over SECONDS of training.

BATCH is the global batch, as graphrun train's --batch_size: each worker
computes BATCH / WORKERS examples per step, so both frameworks make the same
number of PS round trips per example. (Until this was fixed each worker took
BATCH examples, half graphrun's RPCs per example at 2 workers.)

usage: torch_rpc_ps.py [BATCH=256] [SECONDS=5] [WORKERS=2] [OPTIMIZER=adam]
"""
import json
import os
import socket
import sys
import threading
import time

import numpy as np
import torch
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlp import DATA, read_idx  # noqa: E402


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(784, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, 10))


class ParameterServer:
    def __init__(self, optimizer):
        self.model = make_model()
        if optimizer == "adam":
            self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)
        else:
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.lock = threading.Lock()
        self.steps = 0

    def get_params(self):
        with self.lock:
            return [p.detach().clone() for p in self.model.parameters()]

    def apply(self, grads):
        with self.lock:
            for p, g in zip(self.model.parameters(), grads):
                p.grad = g
            self.opt.step()
            self.steps += 1
            return self.steps


_PS = None


def _init_ps(optimizer):
    global _PS
    _PS = ParameterServer(optimizer)


def _get_params():
    return _PS.get_params()


def _apply(grads):
    return _PS.apply(grads)


def _ps_steps():
    return _PS.steps


def run(rank, world, port, batch, seconds, optimizer, out_q):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=4, rpc_timeout=60)
    name = "ps" if rank == 0 else f"worker{rank}"
    rpc.init_rpc(name, rank=rank, world_size=world, rpc_backend_options=opts)
    if rank == 0:
        _init_ps(optimizer)
    else:
        x = read_idx(os.path.join(DATA, "train-images-idx3-ubyte.gz"))
        y = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))
        shard = slice(rank - 1, None, world - 1)
        x = torch.from_numpy(x.reshape(-1, 784)[shard].astype(np.float32) / 255.0)
        y = torch.from_numpy(y[shard].astype(np.int64))
        model = make_model()
        loss_fn = torch.nn.CrossEntropyLoss()
        n = x.shape[0] // batch * batch
        time.sleep(1.0)  # let the PS initialise

        def step(i):
            params = rpc.rpc_sync("ps", _get_params)
            with torch.no_grad():
                for p, v in zip(model.parameters(), params):
                    p.copy_(v)
            j = (i * batch) % n
            model.zero_grad()
            loss_fn(model(x[j:j + batch]), y[j:j + batch]).backward()
            rpc.rpc_sync("ps", _apply, args=([p.grad for p in model.parameters()],))

        for i in range(10):  # warm-up
            step(i)
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step(steps)
            steps += 1
        out_q.put(steps * batch / (time.perf_counter() - start))
    rpc.shutdown()


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5.0
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    optimizer = sys.argv[4] if len(sys.argv) > 4 else "adam"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    if batch % workers != 0:
        sys.exit(f"global batch {batch} is not divisible by {workers} workers")
    world = workers + 1
    procs = [ctx.Process(target=run,
                         args=(r, world, port, batch // workers, seconds, optimizer, q))
             for r in range(world)]
    for p in procs:
        p.start()
    rates = [q.get(timeout=300) for _ in range(workers)]
    for p in procs:
        p.join(timeout=120)
        if p.is_alive():
            p.kill()
    print(json.dumps({"framework": "torch-rpc-ps", "model": "mlp", "batch": batch,
                      "worker_batch": batch // workers,
                      "ps": 1, "workers": workers, "optimizer": optimizer,
                      "examples_per_sec": round(sum(rates), 1),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
