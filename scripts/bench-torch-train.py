#!/usr/bin/env python3
"""The baseline for `wholestore train`'s speed target: the straightforward PyTorch version of its step.

One step, all on the GPU, with the batch shape of `wholestore train` (configs/train.yaml):
  walks:     `walks` uniform random walks of `walk_length` steps (a dead end pads with -1)
  pairs:     every (walk[i], walk[j]) with 0 < |i - j| <= window and both ends valid
  negatives: `negatives` per pair from out-degree^0.75 (torch.multinomial)
  lookups:   two nn.Embedding(sparse=True) tables (input and output vectors)
  loss:      -logsigmoid(u.v) - sum logsigmoid(-u.n), summed over the batch
  update:    backward and SparseAdam.step() on both tables
(`--walks W` is the batch of `wholestore train --set batch_size=B` with B = W * S, S the pair
slots of a walk: (L + 1) * 2w - w(w + 1) for walk length L and window w, 114 for L = 20, w = 3)
and prints positive pairs per second for the whole step (median step time of `repeats` after
`warmup`, CUDA events).  wholestore's figure is the `pairs/s (whole step)` of the summary line
of `wholestore train` on the same graph, GPU and batch; run both in the same session.

The graph: a dataset directory written by `wholestore gen` (row_offsets.bin, col_indices.bin:
the very graph wholestore trains on) or, without --dataset, an R-MAT graph drawn here with the
products shape (2,449,029 nodes, 61,859,140 edges before symmetrizing).

  python3 scripts/bench-torch-train.py [--dataset DIR] [--dim 128] [--negatives 5] \
      [--walk-length 20] [--window 3] [--walks 2048]
"""
import argparse
import os
import statistics

import numpy as np
import torch
import torch.nn.functional as F


def read_dataset(path, dev):
    manifest = {}
    with open(os.path.join(path, "manifest.yaml")) as f:
        for line in f:
            if ":" in line:
                k, v = line.split(":", 1)
                manifest[k.strip()] = v.strip()
    nodes = int(manifest["num_nodes"])
    rowptr = np.fromfile(os.path.join(path, "row_offsets.bin"), dtype="<i8")
    col_type = "<i4" if manifest["col_indices.dtype"] == "int32" else "<i8"
    col = np.fromfile(os.path.join(path, "col_indices.bin"), dtype=col_type)
    return nodes, torch.from_numpy(rowptr).to(dev), torch.from_numpy(col.astype(np.int64)).to(dev)


def rmat(nodes, edges, dev, gen):
    scale = (nodes - 1).bit_length()
    src = torch.zeros(edges, dtype=torch.int64, device=dev)
    dst = torch.zeros(edges, dtype=torch.int64, device=dev)
    for _ in range(scale):
        r = torch.rand(edges, device=dev, generator=gen)
        # Quadrants a=0.57, b=0.19, c=0.19, d=0.05.
        down = (r >= 0.57 + 0.19).to(torch.int64)
        right = (((r >= 0.57) & (r < 0.76)) | (r >= 0.95)).to(torch.int64)
        src = src * 2 + down
        dst = dst * 2 + right
    keep = (src < nodes) & (dst < nodes) & (src != dst)
    src, dst = src[keep], dst[keep]
    src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    order = torch.argsort(src)
    src, dst = src[order], dst[order]
    rowptr = torch.zeros(nodes + 1, dtype=torch.int64, device=dev)
    rowptr[1:] = torch.cumsum(torch.bincount(src, minlength=nodes), 0)
    return nodes, rowptr, dst


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="")
    p.add_argument("--nodes", type=int, default=2_449_029)
    p.add_argument("--edges", type=int, default=61_859_140)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--negatives", type=int, default=5)
    p.add_argument("--walk-length", type=int, default=20)
    p.add_argument("--window", type=int, default=3)
    p.add_argument("--walks", type=int, default=2048, help="walks per step")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench-torch-train: no CUDA device visible to torch")
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(a.seed)
    if a.dataset:
        nodes, rowptr, col = read_dataset(a.dataset, dev)
    else:
        nodes, rowptr, col = rmat(a.nodes, a.edges, dev, gen)
    deg = (rowptr[1:] - rowptr[:-1]).to(torch.float32)
    neg_weights = deg.pow(0.75)
    inp = torch.nn.Embedding(nodes, a.dim, sparse=True, device=dev)
    out = torch.nn.Embedding(nodes, a.dim, sparse=True, device=dev)
    with torch.no_grad():
        inp.weight.uniform_(-0.5 / a.dim, 0.5 / a.dim, generator=gen)
        out.weight.zero_()
    opt = torch.optim.SparseAdam(list(inp.parameters()) + list(out.parameters()), lr=a.lr)
    offsets = [o for o in range(-a.window, a.window + 1) if o != 0]
    pairs_seen = []

    def step():
        # Walks.
        cur = torch.randint(0, nodes, (a.walks,), device=dev, generator=gen)
        walk = [cur]
        for _ in range(a.walk_length):
            valid = cur >= 0
            c = cur.clamp(min=0)
            d = rowptr[c + 1] - rowptr[c]
            r = (torch.rand(a.walks, device=dev, generator=gen) * d).to(torch.int64)
            nxt = col[(rowptr[c] + r).clamp(max=col.numel() - 1)]
            cur = torch.where(valid & (d > 0), nxt, torch.full_like(cur, -1))
            walk.append(cur)
        walk = torch.stack(walk, 1)
        # Pairs from windows.
        centers, contexts = [], []
        L = a.walk_length + 1
        for o in offsets:
            lo, hi = max(0, -o), min(L, L - o)
            c, t = walk[:, lo:hi].reshape(-1), walk[:, lo + o:hi + o].reshape(-1)
            keep = (c >= 0) & (t >= 0)
            centers.append(c[keep])
            contexts.append(t[keep])
        c, t = torch.cat(centers), torch.cat(contexts)
        n = c.numel()
        neg = torch.multinomial(neg_weights, n * a.negatives, replacement=True,
                                generator=gen).view(n, a.negatives)
        # Lookups, loss, gradients, update.
        u = inp(c)
        v = out(torch.cat([t.view(n, 1), neg], 1))
        s = torch.bmm(v, u.unsqueeze(2)).squeeze(2)
        loss = -(F.logsigmoid(s[:, 0]).sum() + F.logsigmoid(-s[:, 1:]).sum())
        opt.zero_grad()
        loss.backward()
        opt.step()
        pairs_seen.append(n)

    for _ in range(a.warmup):
        step()
    times = []
    pairs_seen.clear()
    for _ in range(a.repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1e3)
    ms = statistics.median(times) * 1e3
    pairs = statistics.median(pairs_seen)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(dev)}: {nodes} nodes, "
          f"{col.numel()} edges, dim {a.dim}, {a.negatives} negatives, {a.walks} walks of "
          f"{a.walk_length} steps, window {a.window}, SparseAdam")
    print(f"step {ms:.2f} ms (median of {a.repeats}), {pairs:.0f} positive pairs per step, "
          f"{pairs / (ms / 1e3):.0f} pairs/s (whole step: walks, negatives, lookups, loss, "
          f"gradients, update)")


if __name__ == "__main__":
    main()
