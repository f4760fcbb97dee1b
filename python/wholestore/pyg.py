"""PyG's remote backend over a wholestore Graph: a ``torch_geometric.data.FeatureStore`` whose
node features are the graph's (``gather_features``), a ``torch_geometric.data.GraphStore``
whose one edge type is the graph's CSR, and a ``torch_geometric.sampler.BaseSampler`` that
samples with the store's own sampler, so that PyG's loaders run over a graph in WholeMemory:

    import torch_geometric.loader, wholestore as ws, wholestore.pyg as wpyg
    graph = ws.make_graph(comm, host)                  # or ws.load_graph(comm, dir)
    data = wpyg.remote_backend(graph, y=labels)        # (FeatureStore, GraphStore)
    loader = torch_geometric.loader.NeighborLoader(
        data, num_neighbors=[10, 5], input_nodes=train_ids, batch_size=1024, shuffle=True,
        neighbor_sampler=wpyg.WholestoreSampler(graph, [10, 5]))
    for batch in loader:  # Data: x, y, edge_index, n_id, batch_size, num_sampled_nodes/edges
        ...

Needs torch and torch_geometric (importing this module raises ImportError without them); the
rest of wholestore needs neither.

**Direction.**  PyG passes messages along sampled edges into the seeds (``edge_index[1]`` is
the seed side).  The store samples node v's CSR row, so the store's edge (v, u) is PyG's edge
u -> v: the graph's CSR is PyG's CSC of the same edges.  The GraphStore serves it as such,
``EdgeAttr(None, "csc", size=(n, n))`` with ``(row, colptr) = (col_indices, row_offsets)``, and
edge ids are CSR positions in both.

**Sampling.**  ``WholestoreSampler`` returns what PyG's neighbor sampler returns (a
SamplerOutput: node, row, col, edge, num_sampled_nodes, num_sampled_edges, seeds first), made
from the store's blocks by ``sampler_output``: each node's neighbors are sampled once, at the
hop after the one that reached it.  The store's sample (DGL's message-flow layout) samples the
nodes of earlier hops again at every later hop; those edges are left out, and a node that only
they reached stays in ``node`` without an edge into the nodes before it (nothing flows from it
to a seed).  Seeds must be distinct within a batch.  PyG's own NeighborSampler runs over the
GraphStore too where pyg-lib or torch-sparse is installed; it copies the CSC into the process
(the first ``csc()`` reads the whole graph), where WholestoreSampler samples in the store.

**Where it runs.**  A host-located graph samples and gathers on CPU threads; with
``device="cuda"`` (the default for a device-located graph) the GPU sampler and gather run on
torch's current stream and batches come back on the GPU.  Loaders run with ``num_workers=0``:
worker processes cannot carry the graph (the store's own threads and the GPU do the parallel
work).  On a graph in distributed memory sampling and gathering are collective: every rank
iterates its loader in step (the same number of batches).
"""

import numpy as np
import torch
from torch_geometric.data import Data, EdgeAttr, EdgeLayout, FeatureStore, GraphStore, TensorAttr
from torch_geometric.sampler import BaseSampler, SamplerOutput

from .graph import GpuSampler, _fanouts, _graph


def _tensor(a):
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.asarray(a))


def sampler_output(blocks):
    """The store's sample (a list of Blocks, as Graph.sample or GpuSampler.sample give it) as
    PyG's SamplerOutput: ``node`` the global ids (the seeds first, then each hop's new nodes),
    ``row``/``col`` the source/destination of every edge as indices into ``node``, ``edge``
    the edges' CSR positions (None unless the sample asked for edge ids), per-hop
    ``num_sampled_nodes`` and ``num_sampled_edges``.  The tensors are on the blocks' device."""
    if not blocks:
        raise ValueError("sampler_output: the sample has no blocks")
    node = _tensor(blocks[-1].src_nodes).to(torch.int64)
    rows, cols, edges = [], [], []
    num_nodes, num_edges = [int(blocks[0].num_dst)], []
    first_new = 0  # this hop's destinations from here on were reached by the hop before
    for b in blocks:
        offsets = _tensor(b.offsets).to(torch.int64)
        start = int(offsets[first_new])
        counts = offsets[first_new + 1:] - offsets[first_new:-1]
        rows.append(_tensor(b.src_index)[start:].to(torch.int64))
        cols.append(torch.repeat_interleave(
            torch.arange(first_new, b.num_dst, dtype=torch.int64, device=offsets.device), counts))
        if b.edge_ids is not None:
            edges.append(_tensor(b.edge_ids)[start:].to(torch.int64))
        num_nodes.append(b.num_src - b.num_dst)
        num_edges.append(int(rows[-1].shape[0]))
        first_new = b.num_dst
    edge = torch.cat(edges) if len(edges) == len(blocks) else None
    return SamplerOutput(node=node, row=torch.cat(rows), col=torch.cat(cols), edge=edge,
                         num_sampled_nodes=num_nodes, num_sampled_edges=num_edges)


def batch_data(blocks, x=None):
    """The sample as the Data a PyG NeighborLoader yields: ``edge_index`` ([2, E], row 0 the
    source), ``n_id``, ``e_id`` (with edge ids), ``batch_size`` (the seeds: the first rows),
    ``num_sampled_nodes``, ``num_sampled_edges`` and ``x`` when given (the features of
    ``n_id``, e.g. ``graph.gather_features(n_id)``).  ``wholestore.to_pyg(blocks,
    format="data")`` calls this."""
    out = sampler_output(blocks)
    data = Data(edge_index=torch.stack([out.row, out.col]), n_id=out.node,
                num_nodes=int(out.node.shape[0]))
    if x is not None:
        if int(x.shape[0]) != data.num_nodes:
            raise ValueError(f"x has {int(x.shape[0])} rows, the sample {data.num_nodes} nodes")
        data.x = x
    if out.edge is not None:
        data.e_id = out.edge
    data.batch_size = int(blocks[0].num_dst)
    data.num_sampled_nodes = out.num_sampled_nodes
    data.num_sampled_edges = out.num_sampled_edges
    return data


def _rows(index, num_rows):
    """A TensorAttr index (None: every row; a slice, an int, a bool mask or ids) as int64 ids,
    and whether it was one int (the result then has no row dimension)."""
    if index is None:
        return torch.arange(num_rows), False
    if isinstance(index, slice):
        return torch.arange(num_rows)[index], False
    if isinstance(index, (int, np.integer)):
        return torch.tensor([int(index)]), True
    index = _tensor(index)
    if index.dtype == torch.bool:
        return index.nonzero().reshape(-1), False
    return index.reshape(-1).to(torch.int64), False


class WholestoreFeatureStore(FeatureStore):
    """Node tensors of a homogeneous graph (``group_name`` None): ``x`` is the graph's node
    features, gathered from WholeMemory on each read (read-only here); others (labels, masks:
    the keywords, or put_tensor with ``index=None``) are torch tensors of ``num_nodes`` rows
    kept in this process.  ``device``: where reads of ``x`` run and what they return (default:
    the index's device; "cuda" for the GPU gather) and where the others are moved."""

    def __init__(self, graph, device=None, **node_tensors):
        super().__init__()
        self.graph = _graph(graph)
        self.device = None if device is None else torch.device(device)
        self._tensors = {}
        for name, value in node_tensors.items():
            self.put_tensor(value, group_name=None, attr_name=name, index=None)

    def _features(self, attr):
        return attr.attr_name == "x" and self.graph.has_features

    def _check_group(self, attr):
        if attr.group_name is not None:
            raise KeyError(f"{attr.group_name!r}: a wholestore graph is homogeneous (node "
                           "tensors have group_name None)")

    def _put_tensor(self, tensor, attr):
        self._check_group(attr)
        if self._features(attr):
            raise ValueError("'x' is the graph's node features in WholeMemory; this store only "
                             "reads them")
        tensor = _tensor(tensor)
        if attr.index is None:
            if int(tensor.shape[0]) != self.graph.num_nodes:
                raise ValueError(f"{attr.attr_name!r} has {int(tensor.shape[0])} rows, the graph "
                                 f"{self.graph.num_nodes} nodes")
            self._tensors[attr.attr_name] = tensor
            return True
        if attr.attr_name not in self._tensors:
            raise KeyError(f"{attr.attr_name!r}: put the whole tensor (index=None) first")
        rows, _ = _rows(attr.index, self.graph.num_nodes)
        self._tensors[attr.attr_name][rows] = tensor.to(self._tensors[attr.attr_name].device)
        return True

    def _get_tensor(self, attr):
        self._check_group(attr)
        if self._features(attr):
            rows, one = _rows(attr.index, self.graph.num_nodes)
            if self.device is not None:
                rows = rows.to(self.device)
            out = self.graph.gather_features(rows)
        elif attr.attr_name in self._tensors:
            stored = self._tensors[attr.attr_name]
            rows, one = _rows(attr.index, self.graph.num_nodes)
            out = stored[rows.to(stored.device)]
            if self.device is not None:
                out = out.to(self.device)
        else:
            return None
        return out[0] if one else out

    def _remove_tensor(self, attr):
        self._check_group(attr)
        return self._tensors.pop(attr.attr_name, None) is not None

    def _get_tensor_size(self, attr):
        if attr.group_name is not None:
            return None
        if self._features(attr):
            return (self.graph.num_nodes, self.graph.feature_dim)
        stored = self._tensors.get(attr.attr_name)
        return None if stored is None else tuple(stored.shape)

    def get_all_tensor_attrs(self):
        names = (["x"] if self.graph.has_features else []) + list(self._tensors)
        return [TensorAttr(group_name=None, attr_name=name) for name in names]


def _read_csr(graph, chunk=1 << 20):
    """(row_offsets, col_indices) of a Graph, int64 CPU tensors, read through a sample of every
    neighbor (fanout -1) of ``chunk`` nodes at a time: the bindings give no view of the graph's
    arrays.  Collective on distributed memory."""
    n, e = graph.num_nodes, graph.num_edges
    counts = torch.empty(n, dtype=torch.int64)
    col = torch.empty(e, dtype=torch.int64)
    gpu = None if graph.location == "host" else GpuSampler(graph)
    for begin in range(0, n, chunk):
        end = min(n, begin + chunk)
        if gpu is None:
            (block,) = graph.sample(np.arange(begin, end, dtype=np.int64), [-1], edge_ids=True)
        else:
            (block,) = gpu.sample(torch.arange(begin, end, device="cuda"), [-1], edge_ids=True)
        offsets = _tensor(block.offsets).cpu()
        counts[begin:end] = offsets[1:] - offsets[:-1]
        src_nodes = _tensor(block.src_nodes).cpu()
        col[_tensor(block.edge_ids).cpu()] = src_nodes[_tensor(block.src_index).cpu().long()]
    row_offsets = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=row_offsets[1:])
    return row_offsets, col


class WholestoreGraphStore(GraphStore):
    """The graph's edges as one homogeneous edge type (``edge_type`` None) in PyG's CSC layout:
    ``(row, colptr)`` = the graph's (col_indices, row_offsets) (the module's docstring says
    why), or COO ``(row, col)`` sorted by destination.  ``csr``: the graph's (row_offsets,
    col_indices) when the caller still has them (a HostGraph's); otherwise the first read
    takes them from the store (a sample of every neighbor of every node; collective on
    distributed memory) and keeps them in this process.  Read-only: put and remove raise."""

    def __init__(self, graph, csr=None):
        super().__init__()
        self.graph = _graph(graph)
        self._csc = None
        if csr is not None:
            row_offsets, col_indices = (_tensor(a).to(torch.int64).cpu() for a in csr)
            if (row_offsets.shape[0] != graph.num_nodes + 1
                    or col_indices.shape[0] != graph.num_edges):
                raise ValueError(f"csr has {row_offsets.shape[0]} row offsets and "
                                 f"{col_indices.shape[0]} columns, the graph {graph.num_nodes} "
                                 f"nodes and {graph.num_edges} edges")
            self._csc = (col_indices, row_offsets)

    def _edge_attr(self):
        n = self.graph.num_nodes
        return EdgeAttr(edge_type=None, layout=EdgeLayout.CSC, is_sorted=True, size=(n, n))

    def csc_tensors(self):
        """(row, colptr): the CSC of PyG's direction, read from the store on first use."""
        if self._csc is None:
            row_offsets, col_indices = _read_csr(self.graph)
            self._csc = (col_indices, row_offsets)
        return self._csc

    def _put_edge_index(self, edge_index, edge_attr):
        raise NotImplementedError("the graph lives in WholeMemory and this store only reads it "
                                  "(make another Graph with make_graph)")

    def _remove_edge_index(self, edge_attr):
        raise NotImplementedError("the graph lives in WholeMemory and this store only reads it")

    def _get_edge_index(self, edge_attr):
        if edge_attr.edge_type is not None:
            return None
        row, colptr = self.csc_tensors()
        if edge_attr.layout == EdgeLayout.CSC:
            return row, colptr
        if edge_attr.layout == EdgeLayout.COO:
            dst = torch.repeat_interleave(torch.arange(self.graph.num_nodes), colptr.diff())
            return row, dst
        return None  # CSR of PyG's direction: GraphStore.csr() converts from the CSC

    def get_all_edge_attrs(self):
        return [self._edge_attr()]


def remote_backend(graph, device=None, csr=None, **node_tensors):
    """``(WholestoreFeatureStore(graph, device, **node_tensors), WholestoreGraphStore(graph,
    csr))``: the ``data`` argument of PyG's loaders."""
    return WholestoreFeatureStore(graph, device, **node_tensors), WholestoreGraphStore(graph, csr)


class WholestoreSampler(BaseSampler):
    """PyG's node sampler backed by the store's sampler: ``num_neighbors`` per hop (-1: every
    neighbor), ``method`` one of wholestore.SAMPLE_METHODS.  ``random_seed``: None draws each
    batch's seed from torch's default generator (torch.manual_seed makes a run repeat, as with
    PyG's sampler); an int samples every batch with that seed (the store's sample is a function
    of the seeds and the seed, so the same input nodes give the same batch: for evaluation and
    tests).  ``device``: "cpu" for the CPU sampler (host-located graphs), "cuda" for the GPU
    sampler; default: the GPU for a device-located graph, else the CPU.  Output as
    ``sampler_output`` gives it, on that device.  Node-level loaders only (NeighborLoader,
    NodeLoader); sample_from_edges raises NotImplementedError."""

    def __init__(self, graph, num_neighbors, method="uniform", random_seed=None, device=None,
                 edge_ids=True):
        self.graph = _graph(graph)
        self.num_neighbors = _fanouts(num_neighbors)
        self.method = method
        self.random_seed = random_seed
        if device is None:
            device = "cpu" if graph.location == "host" else "cuda"
        self.device = torch.device(device)
        if self.device.type == "cpu" and graph.location != "host":
            raise ValueError("the CPU sampler needs a host-located graph (use device='cuda')")
        self.edge_ids = bool(edge_ids)
        self._gpu = None

    def sample(self, seeds, random_seed):
        """The store's blocks for int64 ``seeds`` (any device)."""
        if self.device.type == "cpu":
            return self.graph.sample(seeds.cpu().numpy(), self.num_neighbors, self.method,
                                     random_seed, self.edge_ids)
        if self._gpu is None:
            self._gpu = GpuSampler(self.graph)
        return self._gpu.sample(seeds.to(self.device), self.num_neighbors, self.method,
                                random_seed, self.edge_ids)

    def sample_from_nodes(self, index, **kwargs):
        """A SamplerOutput for the seeds ``index.node`` (``random_seed=`` overrides the
        sampler's for this call)."""
        if index.input_type is not None:
            raise ValueError(f"input type {index.input_type!r}: a wholestore graph is "
                             "homogeneous")
        if index.time is not None:
            raise NotImplementedError("WholestoreSampler does not sample by time")
        seeds = _tensor(index.node).to(torch.int64)
        random_seed = kwargs.get("random_seed", self.random_seed)
        if random_seed is None:
            random_seed = int(torch.randint(0, 2**62, ()))
        blocks = self.sample(seeds, random_seed)
        if blocks[0].num_dst != int(seeds.shape[0]):
            raise ValueError(f"{int(seeds.shape[0]) - blocks[0].num_dst} seed(s) repeat in a "
                             "batch of input nodes: PyG's batch holds each seed once, first")
        out = sampler_output(blocks)
        out.metadata = (index.input_id, index.time)
        return out

    def sample_from_edges(self, index, neg_sampling=None):
        raise NotImplementedError("WholestoreSampler samples from nodes only (NeighborLoader, "
                                  "NodeLoader), not for link-level loaders")


__all__ = ["WholestoreFeatureStore", "WholestoreGraphStore", "WholestoreSampler",
           "batch_data", "remote_backend", "sampler_output"]
