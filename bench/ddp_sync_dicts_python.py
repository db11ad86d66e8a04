#!/usr/bin/env python3
"""Peer of `bench_ddp --what sync_dicts`: the path Python OML takes to merge validation
outputs across ranks — every rank pickles its dict and calls torch.distributed's
all_gather_object (Gloo), then tensors are concatenated in rank order.

    python3 bench/ddp_sync_dicts_python.py [--nproc 2 --rows 100000 --dim 512 --repeats 5]
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def merge(gathered):
    merged = {}
    for key in gathered[0]:
        values = [g[key] for g in gathered]
        if isinstance(values[0], torch.Tensor):
            merged[key] = torch.cat(values)
        else:
            merged[key] = [v for part in values for v in part]
    return merged


def worker(rank, args, port):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=args.nproc)
    torch.manual_seed(rank)
    local = {"embeddings": torch.randn(args.rows, args.dim),
             "indices": torch.arange(args.rows) + rank * args.rows}
    times = []
    for i in range(args.repeats + 1):
        dist.barrier()
        start = time.perf_counter()
        gathered = [None] * args.nproc
        dist.all_gather_object(gathered, local)
        merged = merge(gathered)
        elapsed = time.perf_counter() - start
        assert merged["embeddings"].shape[0] == args.rows * args.nproc
        if i > 0:
            times.append(elapsed)
    if rank == 0:
        print(f"python all_gather_object {args.rows} x {args.dim} float32 per rank, {args.nproc} ranks: "
              f"median {statistics.median(times):.3f} s, min {min(times):.3f} s over {args.repeats} runs "
              f"(torch {torch.__version__})")
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--rows", type=int, default=100000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(worker, args=(args, port), nprocs=args.nproc)


if __name__ == "__main__":
    main()
