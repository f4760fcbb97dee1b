#!/usr/bin/env python3
"""The peer figure for the embedding bench: torch's sparse embedding training step on the GPU.

For the issue's shape (rows x dim float32 table, a batch of random indices), times
  lookup:  F.embedding(idx, weight)
  step:    lookup + backward of sum(out * grad_out) + optimizer.step() for
           nn.Embedding(sparse=True) with SparseAdam, Adagrad and SGD
with CUDA events (median of `repeats` after `warmup`).  Run it on the same GPU in the same
session as `wholestore bench configs/bench_embedding.yaml` so the two compare.

  python3 scripts/bench-torch-embedding.py [--rows 10000000] [--dim 128] [--batch 1048576]
"""
import argparse
import statistics

import torch


def timed(fn, repeats, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--batch", type=int, default=1 << 20)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench-torch-embedding: no CUDA device visible to torch")
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(a.seed)
    idx = torch.randint(0, a.rows, (a.batch,), device=dev, generator=g)
    unique = torch.unique(idx).numel()
    grad_out = torch.randn(a.batch, a.dim, device=dev, generator=g)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(dev)}: {a.rows} x {a.dim} "
          f"float32, batch {a.batch} uniform indices ({unique} unique)")

    weight = torch.empty(a.rows, a.dim, device=dev).uniform_(-0.05, 0.05)
    ms = timed(lambda: torch.nn.functional.embedding(idx, weight), a.repeats, a.warmup)
    gbps = a.batch * (8 + 2 * 4 * a.dim) / (ms * 1e-3) / 1e9
    print(f"lookup F.embedding: {ms:.3f} ms, {gbps:.0f} GB/s of ideal traffic")
    del weight

    for name, make in (("SparseAdam", lambda ps: torch.optim.SparseAdam(ps, lr=0.01)),
                       ("Adagrad", lambda ps: torch.optim.Adagrad(ps, lr=0.01)),
                       ("SGD", lambda ps: torch.optim.SGD(ps, lr=0.01))):
        emb = torch.nn.Embedding(a.rows, a.dim, sparse=True, device=dev)
        opt = make(list(emb.parameters()))

        def step():
            opt.zero_grad(set_to_none=True)
            out = emb(idx)
            out.backward(grad_out)
            opt.step()

        ms = timed(step, a.repeats, a.warmup)
        print(f"step nn.Embedding(sparse=True) + {name}: {ms:.3f} ms "
              f"({a.batch / ms / 1e3:.0f} M lookups/s)")
        del emb, opt
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
