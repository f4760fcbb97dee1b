#!/usr/bin/env python3
"""GraphSAGE node classification with wholestore's sampler and feature gather.

The graph (a labelled stochastic block model shaped like ogbn-products by default, or a dataset
written by `wholestore gen --set kind=sbm`) lives in WholeMemory; each training batch is sampled
by the store's GPU sampler (the CPU sampler without a GPU), its input features gathered from the
store, and optionally concatenated with learnable node embeddings kept in a store table and
trained by the store's sparse optimizer (wholestore.nn.Embedding).  The model is plain PyTorch;
with `--loader pyg-remote` PyG's NeighborLoader reads the graph in the store through PyG's remote
backend (wholestore.pyg: the store's sampler and feature gather behind PyG's FeatureStore,
GraphStore and sampler interfaces) and the model is built of torch_geometric.nn.SAGEConv.

    python examples/graphsage.py                         # one GPU (or the CPU), default graph
    python examples/graphsage.py --model mlp             # the features-only baseline
    torchrun --nproc-per-node 2 examples/graphsage.py    # data parallel over two GPUs
    python examples/graphsage.py --loader pyg            # PyG's NeighborLoader, same model
    python examples/graphsage.py --loader pyg-remote     # PyG's NeighborLoader over the store

Each epoch prints its time split into sampling, gathering, forward/backward and optimizer, the
share of the data path (sampling + gathering), the loss and the validation accuracy; the end
prints the test accuracy and a `summary:` line.  Phases are separated by device
synchronizations so that each is timed alone (a run without them overlaps a little more).
"""

import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import wholestore as ws


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_argument_group("graph")
    g.add_argument("--dataset", help="a labelled dataset directory (else one is generated)")
    g.add_argument("--nodes", type=int, default=2_449_029, help="generated: nodes")
    g.add_argument("--classes", type=int, default=47, help="generated: classes")
    g.add_argument("--avg-degree", type=float, default=25.0,
                   help="generated: undirected edges per node (each stored both ways)")
    g.add_argument("--homophily", type=float, default=0.4,
                   help="generated: expected share of edges inside a class")
    g.add_argument("--feature-dim", type=int, default=100, help="generated: feature width")
    g.add_argument("--snr", type=float, default=0.2,
                   help="generated: class signal per feature entry (noise has std 1)")
    g.add_argument("--train-fraction", type=float, default=0.08)
    g.add_argument("--val-fraction", type=float, default=0.02)
    g.add_argument("--graph-seed", type=int, default=0)
    g.add_argument("--save-dataset", metavar="DIR",
                   help="write the generated graph as a dataset to DIR and stop (later runs "
                        "read it with --dataset DIR instead of generating it again)")
    g.add_argument("--memory-type", default="continuous",
                   choices=["continuous", "chunked", "distributed"])
    g.add_argument("--location", default=None, choices=["device", "host"],
                   help="where the graph lives (default: device with a GPU, else host)")
    m = p.add_argument_group("model and training")
    m.add_argument("--model", default="sage", choices=["sage", "mlp"])
    m.add_argument("--loader", default="wholestore", choices=["wholestore", "pyg", "pyg-remote"],
                   help="wholestore: the store's sampler and gather; pyg: PyG's NeighborLoader "
                        "over an in-process copy of the graph; pyg-remote: PyG's "
                        "NeighborLoader over the store (PyG's SAGEConv)")
    m.add_argument("--fanouts", default="15,10,5")
    m.add_argument("--hidden", type=int, default=256)
    m.add_argument("--dropout", type=float, default=0.5)
    m.add_argument("--batch-size", type=int, default=1024)
    m.add_argument("--eval-batch-size", type=int, default=4096)
    m.add_argument("--epochs", type=int, default=5)
    m.add_argument("--lr", type=float, default=0.003)
    m.add_argument("--embedding-dim", type=int, default=0,
                   help="learnable node embeddings (a store table, sparse Adam) beside the "
                        "features; 0: none")
    m.add_argument("--embedding-lr", type=float, default=0.01)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--max-batches", type=int, default=0,
                   help="stop each epoch after this many batches (0: all; for smoke tests)")
    m.add_argument("--max-eval-batches", type=int, default=0,
                   help="evaluate on at most this many batches (0: all)")
    m.add_argument("--pyg-workers", type=int, default=4, help="NeighborLoader num_workers")
    args = p.parse_args(argv)
    args.fanouts = [int(f) for f in args.fanouts.split(",") if f]
    if not args.fanouts:
        p.error("--fanouts needs at least one hop")
    return args


# ---------------------------------------------------------------------------------------------
# The model: GraphSAGE (mean aggregation) over hop-wise blocks, or over a whole subgraph.


class SAGEConv(torch.nn.Module):
    """out[i] = W_n mean_{j in N(i)} h[j] + W_s h[i] + b, for the first num_dst rows of h."""

    def __init__(self, fan_in, fan_out):
        super().__init__()
        self.lin_neigh = torch.nn.Linear(fan_in, fan_out)
        self.lin_self = torch.nn.Linear(fan_in, fan_out, bias=False)

    def forward(self, h, edges):
        src, dst, inv_deg, num_dst = edges
        agg = torch.zeros((num_dst, h.shape[1]), dtype=h.dtype, device=h.device)
        agg.index_add_(0, dst, h[src])
        return self.lin_neigh(agg * inv_deg[:, None]) + self.lin_self(h[:num_dst])


class GraphSAGE(torch.nn.Module):
    def __init__(self, fan_in, hidden, classes, layers, dropout):
        super().__init__()
        widths = [fan_in] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(
            SAGEConv(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, layer_edges):
        """layer_edges[l]: what layer l reads (src, dst, inv_deg, num_dst)."""
        h = x
        for i, (conv, edges) in enumerate(zip(self.convs, layer_edges)):
            h = conv(h, edges)
            if i + 1 < len(self.convs):
                h = F.dropout(F.relu(h), self.dropout, self.training)
        return h


class PygGraphSAGE(torch.nn.Module):
    """GraphSAGE of torch_geometric.nn.SAGEConv layers (mean aggregation) over a whole sampled
    subgraph: every layer reads the batch's edge_index."""

    def __init__(self, fan_in, hidden, classes, layers, dropout):
        super().__init__()
        from torch_geometric.nn import SAGEConv as PygSAGEConv
        widths = [fan_in] + [hidden] * (layers - 1) + [classes]
        self.convs = torch.nn.ModuleList(
            PygSAGEConv(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, layer_edges):
        """layer_edges[l]: the edge_index layer l reads."""
        h = x
        for i, (conv, edge_index) in enumerate(zip(self.convs, layer_edges)):
            h = conv(h, edge_index)
            if i + 1 < len(self.convs):
                h = F.dropout(F.relu(h), self.dropout, self.training)
        return h


class MLP(torch.nn.Module):
    def __init__(self, fan_in, hidden, classes, layers, dropout):
        super().__init__()
        widths = [fan_in] + [hidden] * (layers - 1) + [classes]
        self.lins = torch.nn.ModuleList(
            torch.nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.dropout = dropout

    def forward(self, x, layer_edges=None):
        h = x
        for i, lin in enumerate(self.lins):
            h = lin(h)
            if i + 1 < len(self.lins):
                h = F.dropout(F.relu(h), self.dropout, self.training)
        return h


def block_edges(block, device):
    """(src, dst, inv_deg, num_dst) of one sampled block, on `device`."""
    as_tensor = (lambda a: a) if isinstance(block.offsets, torch.Tensor) else torch.from_numpy
    offsets = as_tensor(block.offsets).to(device)
    src = as_tensor(block.src_index).to(device).long()
    counts = offsets[1:] - offsets[:-1]
    dst = torch.repeat_interleave(torch.arange(block.num_dst, device=device), counts,
                                  output_size=block.num_edges)
    return src, dst, 1.0 / counts.clamp(min=1).to(torch.float32), block.num_dst


def subgraph_edges(edge_index, num_nodes):
    """(src, dst, inv_deg, num_nodes) of a whole sampled subgraph (PyG's loader)."""
    src, dst = edge_index[0], edge_index[1]
    deg = torch.bincount(dst, minlength=num_nodes)
    return src, dst, 1.0 / deg.clamp(min=1).to(torch.float32), num_nodes


# ---------------------------------------------------------------------------------------------
# The job: ranks, devices, the graph in the store.


class Job:
    def __init__(self, args):
        self.comm = ws.init()  # launch, torchrun or mpirun environment; one rank otherwise
        self.rank, self.size = self.comm.rank, self.comm.size
        self.cuda = torch.cuda.is_available() and ws.cuda_built() and ws.device_count() > 0
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.cuda \
            else torch.device("cpu")
        self.dist = None
        if self.size > 1:
            import torch.distributed as dist
            backend = "nccl" if self.cuda else "gloo"
            if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") in ("True", "1"):
                # torchrun: its agent serves torch's store on MASTER_PORT (the job's store took
                # the next port).
                dist.init_process_group(backend)
            else:
                # `wholestore launch` or mpirun: the job's store holds MASTER_PORT.
                addr, port = ws.read_launch_env()["master_addr"], ws.read_launch_env()[
                    "master_port"]
                dist.init_process_group(backend, init_method=f"tcp://{addr}:{port + 1}",
                                        rank=self.rank, world_size=self.size)
            self.dist = dist

    def log(self, *parts):
        if self.rank == 0:
            print(*parts, flush=True)

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def all_sum(self, values):
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        if self.dist is not None:
            self.dist.all_reduce(t)
        return t.tolist()


def load_host_graph(args, job):
    t0 = time.perf_counter()
    if args.dataset:
        host = ws.read_dataset(args.dataset)
        what = args.dataset
    else:
        host = ws.generate_sbm(args.nodes, args.classes, args.avg_degree, args.homophily,
                               feature_dim=args.feature_dim, snr=args.snr,
                               train_fraction=args.train_fraction,
                               val_fraction=args.val_fraction, seed=args.graph_seed)
        what = (f"SBM (products-shaped by default): {args.classes} classes, homophily "
                f"{args.homophily}, snr {args.snr}")
    if host.num_classes == 0 or host.node_features is None:
        sys.exit(f"graphsage: {what} has no labels or no features (write one with "
                 "`wholestore gen --set kind=sbm --set feature_dim=...`)")
    job.log(f"graph: {what}: {host.num_nodes:,} nodes, {host.num_edges:,} edges, "
            f"{host.feature_dim} features, {host.num_classes} classes "
            f"({time.perf_counter() - t0:.1f} s)")
    return host


# ---------------------------------------------------------------------------------------------
# Batches: the store's sampler and gather, or PyG's NeighborLoader.


class StoreBatches:
    """Seeds -> (input features, per-layer edges, input node ids) with wholestore."""

    def __init__(self, args, job, host):
        self.args, self.job = args, job
        location = args.location or ("device" if job.cuda else "host")
        t0 = time.perf_counter()
        self.graph = ws.make_graph(job.comm, host, args.memory_type, location)
        job.log(f"store: graph and features in {args.memory_type} {location} memory over "
                f"{job.size} rank(s) ({time.perf_counter() - t0:.1f} s)")
        self.sampler = ws.GpuSampler(self.graph) if job.cuda else None

    def sample(self, seeds, random_seed, with_edges=True):
        """Layer edges (first layer first) and the first layer's input node ids."""
        if not with_edges:
            return None, seeds
        if self.sampler is not None:
            blocks = self.sampler.sample(seeds, self.args.fanouts, random_seed=random_seed)
            nodes = blocks[-1].src_nodes
        else:
            blocks = self.graph.sample(seeds.numpy(), self.args.fanouts,
                                       random_seed=random_seed)
            nodes = torch.from_numpy(blocks[-1].src_nodes)
        return [block_edges(b, self.job.device) for b in reversed(blocks)], nodes

    def gather(self, nodes):
        x = self.graph.gather_features(nodes)
        return x if isinstance(x, torch.Tensor) else torch.from_numpy(x)


def batches_of(nodes, batch_size, limit):
    count = (len(nodes) + batch_size - 1) // batch_size
    if limit:
        count = min(count, limit)
    return [nodes[i * batch_size:(i + 1) * batch_size] for i in range(count)]


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    job = Job(args)
    host = load_host_graph(args, job)
    if args.save_dataset:
        if job.rank == 0:
            ws.write_dataset(args.save_dataset, host)
        job.log(f"dataset written to {args.save_dataset}")
        return None
    labels = torch.from_numpy(np.asarray(host.node_labels).astype(np.int64)).to(job.device)
    split = np.asarray(host.node_split)
    train, val, test = (np.flatnonzero(split == s).astype(np.int64) for s in (0, 1, 2))
    job.log(f"split: {len(train):,} train, {len(val):,} validation, {len(test):,} test")

    layers = len(args.fanouts)
    fan_in = host.feature_dim + args.embedding_dim
    model_type = MLP if args.model == "mlp" else \
        PygGraphSAGE if args.loader == "pyg-remote" else GraphSAGE
    model = model_type(fan_in, args.hidden, host.num_classes, layers, args.dropout).to(job.device)
    if job.dist is not None:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[job.device.index] if job.cuda else None)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    embedding = None
    if args.embedding_dim > 0:
        table = ws.EmbeddingTable(job.comm, host.num_nodes, args.embedding_dim, "float32",
                                  args.memory_type, "device" if job.cuda else "host",
                                  init_range=(-0.1, 0.1), seed=args.seed, optimizer="adam")
        embedding = ws.nn.Embedding(table, lr=args.embedding_lr)

    store = None
    pyg = None
    if args.loader == "wholestore" or args.model == "mlp":
        store = StoreBatches(args, job, host)
    elif args.loader == "pyg-remote":
        pyg = RemoteBatches(args, job, host)
    else:
        pyg = PygBatches(args, job, host)
    del host  # the store holds the graph now (PyG's loader keeps its own copy)

    def inputs(x, nodes):
        if embedding is None:
            return x
        return torch.cat([x, embedding(nodes.to(job.device))], dim=1)

    def eval_batches(share):
        """(input features, layer edges, input nodes, labels) of the evaluation batches."""
        if pyg is not None:
            yield from pyg.eval_batches(share, args.eval_batch_size, args.max_eval_batches)
            return
        for i, seeds in enumerate(batches_of(share, args.eval_batch_size,
                                             args.max_eval_batches)):
            seeds_t = torch.from_numpy(seeds).to(job.device)
            edges, nodes_in = store.sample(seeds_t, 1_000_003 + i,
                                           with_edges=args.model == "sage")
            yield store.gather(nodes_in).to(job.device), edges, nodes_in, labels[seeds_t]

    def evaluate(nodes):
        model.eval()
        correct = seen = 0
        with torch.no_grad():
            for x, edges, nodes_in, y in eval_batches(nodes[job.rank::job.size]):
                out = model(inputs(x, nodes_in), edges)[:len(y)]
                correct += int((out.argmax(1) == y).sum())
                seen += len(y)
        correct, seen = job.all_sum([correct, seen])
        model.train()
        return correct / max(seen, 1), int(seen)

    per_rank = len(train) // job.size  # every rank runs the same number of steps
    totals = {"epoch": 0.0, "sampling": 0.0, "gathering": 0.0, "fwd_bwd": 0.0, "optimizer": 0.0}
    val_acc = 0.0
    for epoch in range(1, args.epochs + 1):
        perm = np.random.default_rng([args.seed, epoch]).permutation(train)
        mine = perm[job.rank * per_rank:(job.rank + 1) * per_rank]
        t = dict.fromkeys(totals, 0.0)
        loss_sum, steps = 0.0, 0
        job.sync()
        epoch_start = time.perf_counter()
        batches = pyg.epoch(mine, args.max_batches) if pyg is not None else \
            batches_of(mine, args.batch_size, args.max_batches)
        step_start = time.perf_counter()
        for b, seeds in enumerate(batches):
            # Sampling (PyG: its loader samples and slices features together).
            if pyg is not None:
                x, edges, nodes_in, y = pyg.train_batch(seeds)
                job.sync()
                t1 = time.perf_counter()
                t["sampling"] += t1 - step_start
                t2 = t1
            else:
                seeds_t = torch.from_numpy(seeds).to(job.device)
                edges, nodes_in = store.sample(seeds_t, (args.seed * 1009 + epoch) * 1_000_003
                                               + b, with_edges=args.model == "sage")
                job.sync()
                t1 = time.perf_counter()
                t["sampling"] += t1 - step_start
                x = store.gather(nodes_in).to(job.device)
                y = labels[seeds_t]
                job.sync()
                t2 = time.perf_counter()
                t["gathering"] += t2 - t1
            out = model(inputs(x, nodes_in), edges)[:len(y)]
            loss = F.cross_entropy(out, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            loss_sum += float(loss)  # synchronizes
            t3 = time.perf_counter()
            t["fwd_bwd"] += t3 - t2
            optimizer.step()
            job.sync()
            step_start = time.perf_counter()
            t["optimizer"] += step_start - t3
            steps += 1
        t["epoch"] = time.perf_counter() - epoch_start
        for k in totals:
            totals[k] += t[k]
        val_acc, _ = evaluate(val)
        data = t["sampling"] + t["gathering"]
        job.log(f"epoch {epoch}: loss {loss_sum / max(steps, 1):.4f}, validation accuracy "
                f"{val_acc:.4f} | {t['epoch']:.2f} s for {steps} steps: sampling "
                f"{t['sampling']:.2f} s, gathering {t['gathering']:.2f} s, forward/backward "
                f"{t['fwd_bwd']:.2f} s, optimizer {t['optimizer']:.2f} s; data path "
                f"{100 * data / t['epoch']:.1f}% of the epoch")
    test_acc, tested = evaluate(test)
    epochs = max(args.epochs, 1)
    data_share = 100 * (totals["sampling"] + totals["gathering"]) / max(totals["epoch"], 1e-9)
    job.log(f"test accuracy {test_acc:.4f} on {tested:,} test nodes")
    job.log(f"summary: model={args.model} loader={'-' if args.model == 'mlp' else args.loader} "
            f"ranks={job.size} device={job.device.type} test_acc={test_acc:.4f} "
            f"val_acc={val_acc:.4f} epoch_s={totals['epoch'] / epochs:.3f} "
            f"sampling_s={totals['sampling'] / epochs:.3f} "
            f"gathering_s={totals['gathering'] / epochs:.3f} "
            f"fwd_bwd_s={totals['fwd_bwd'] / epochs:.3f} "
            f"optimizer_s={totals['optimizer'] / epochs:.3f} data_path={data_share:.1f}%")
    if job.dist is not None:
        job.dist.destroy_process_group()
    return test_acc


class PygBatches:
    """PyG's NeighborLoader over the same graph (CPU sampling and feature slicing, then a copy
    to the GPU); the model runs on the whole sampled subgraph, which gives the seeds the same
    outputs as the hop-wise blocks."""

    def __init__(self, args, job, host):
        try:
            from torch_geometric.data import Data
            from torch_geometric.loader import NeighborLoader
        except ImportError as e:
            sys.exit(f"graphsage: --loader pyg needs torch_geometric: {e}")
        self.args, self.job, self.loader_type = args, job, NeighborLoader
        t0 = time.perf_counter()
        offsets = np.asarray(host.row_offsets)
        dst = torch.from_numpy(np.repeat(np.arange(host.num_nodes, dtype=np.int64),
                                         np.diff(offsets)))
        src = torch.from_numpy(np.asarray(host.col_indices).astype(np.int64))
        # Messages flow from a node's neighbors to it: PyG samples edges into the seeds.
        self.data = Data(x=torch.from_numpy(np.asarray(host.node_features)),
                         y=torch.from_numpy(np.asarray(host.node_labels).astype(np.int64)),
                         edge_index=torch.stack([src, dst]), num_nodes=host.num_nodes)
        try:  # one batch in this process: a loader without a sampling backend fails here
            next(iter(self._loader(np.arange(1, dtype=np.int64), 1, False, workers=0)))
        except ImportError as e:
            sys.exit(f"graphsage: PyG's NeighborLoader cannot sample here: {e}")
        job.log(f"pyg: graph as a Data object ({time.perf_counter() - t0:.1f} s)")

    def _loader(self, seeds, batch_size, shuffle, workers=None):
        return self.loader_type(self.data, num_neighbors=self.args.fanouts,
                                batch_size=batch_size, input_nodes=torch.from_numpy(seeds),
                                shuffle=shuffle, num_workers=self.args.pyg_workers
                                if workers is None else workers)

    def epoch(self, seeds, limit):
        loader = self._loader(seeds, self.args.batch_size, True)
        for i, batch in enumerate(loader):
            if limit and i >= limit:
                break
            yield batch

    def train_batch(self, batch):
        """(features, layer edges, input node ids, seed labels) on the device."""
        dev = self.job.device
        x = batch.x.to(dev, non_blocking=True)
        edges = subgraph_edges(batch.edge_index.to(dev), batch.num_nodes)
        y = batch.y[:batch.batch_size].to(dev)
        return x, [edges] * len(self.args.fanouts), batch.n_id, y

    def eval_batches(self, seeds, batch_size, limit):
        loader = self._loader(seeds, batch_size, False)
        for i, batch in enumerate(loader):
            if limit and i >= limit:
                break
            yield self.train_batch(batch)


class RemoteBatches(PygBatches):
    """PyG's NeighborLoader over the graph in the store (wholestore.pyg's remote backend): the
    store's sampler (the GPU one with a GPU) and feature gather, PyG's batch format."""

    def __init__(self, args, job, host):
        try:
            from torch_geometric.loader import NeighborLoader
            import wholestore.pyg as wpyg
        except ImportError as e:
            sys.exit(f"graphsage: --loader pyg-remote needs torch_geometric: {e}")
        self.args, self.job, self.loader_type, self.wpyg = args, job, NeighborLoader, wpyg
        location = args.location or ("device" if job.cuda else "host")
        t0 = time.perf_counter()
        self.graph = ws.make_graph(job.comm, host, args.memory_type, location)
        labels = torch.from_numpy(np.asarray(host.node_labels).astype(np.int64))
        self.data = wpyg.remote_backend(self.graph, device=job.device, y=labels)
        job.log(f"pyg-remote: graph and features in {args.memory_type} {location} memory over "
                f"{job.size} rank(s), PyG's loader over them "
                f"({time.perf_counter() - t0:.1f} s)")

    def _loader(self, seeds, batch_size, shuffle, workers=None):
        # The store samples (on the GPU with one) and gathers; a loader's worker processes
        # could not carry the graph, so none.
        sampler = self.wpyg.WholestoreSampler(self.graph, self.args.fanouts,
                                              device="cuda" if self.job.cuda else "cpu")
        return self.loader_type(self.data, num_neighbors=self.args.fanouts,
                                batch_size=batch_size, input_nodes=torch.from_numpy(seeds),
                                shuffle=shuffle, neighbor_sampler=sampler)

    def train_batch(self, batch):
        """(features, layer edges, input node ids, seed labels) on the device."""
        dev = self.job.device
        y = batch.y[:batch.batch_size].to(dev)
        return (batch.x.to(dev), [batch.edge_index.to(dev)] * len(self.args.fanouts), batch.n_id,
                y)


if __name__ == "__main__":
    main()
