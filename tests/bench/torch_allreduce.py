#!/usr/bin/python3
"""gloo baseline for tests/bench/allreduce_bench.sh.

torch.distributed with the gloo backend (Debian's python3-torch): PROCS
processes on one host all-reduce a float32 tensor of BYTES bytes ITERS
times after a warm-up; rank 0 prints one line
  gloo bytes=N procs=P us=T busbw=B
with the median time per all-reduce and busbw = bytes / time * 2(p-1)/p.

usage: torch_allreduce.py PROCS BYTES ITERS
"""
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, procs, nbytes, iters, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=procs)
    x = torch.full((max(1, nbytes // 4),), float(rank), dtype=torch.float32)
    times = []
    for i in range(3 + iters):
        t0 = time.perf_counter()
        dist.all_reduce(x)
        dt = time.perf_counter() - t0
        if i >= 3:
            times.append(dt)
    if rank == 0:
        t = statistics.median(times)
        busbw = nbytes / t / 1e9 * 2 * (procs - 1) / procs
        print(f"gloo bytes={nbytes} procs={procs} us={t * 1e6:.1f} busbw={busbw:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def free_port():
    # The port for gloo's rendezvous store only (bound by rank 0 at once).
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    procs, nbytes, iters = (int(a) for a in sys.argv[1:4])
    mp.spawn(worker, args=(procs, nbytes, iters, free_port()), nprocs=procs, join=True)
