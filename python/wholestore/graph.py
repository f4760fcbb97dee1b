"""Graphs: host graphs and datasets on disk (generate, convert, read, write), edge splits for
link prediction (split_edges), graphs in WholeMemory shared by the ranks (load_graph,
make_graph), feature gathers and neighbor sampling into blocks (the CPU sampler; the GPU
sampler in GpuSampler).

Also random walks (Graph.random_walks), negative draws (NegativeSampler), and a sample in the
shapes PyG's and DGL's GNN code consume (to_pyg, to_dgl_blocks_args; neither is imported).

A sample is a list of Blocks in sampling order: blocks[0] has the seeds as destinations, and a
GNN's first layer consumes blocks[-1] (docs/architecture.md, "Graphs in WholeMemory and
neighbor sampling").  The result depends only on (graph, seeds, fanouts, method, random_seed),
the same on the CPU and the GPU.
"""

import os
from dataclasses import dataclass

import numpy as np

from . import _arrays, _checks, _core

HostGraph = _core.HostGraph
EdgeSplit = _core.EdgeSplit
SAMPLE_METHODS = ("uniform", "uniform_with_replacement", "weighted")


@dataclass
class Block:
    """One hop of a sample.  ``src_nodes``: global ids, the first ``num_dst`` are the
    destination nodes; dst node i's edges are ``offsets[i]:offsets[i+1]``; ``src_index[e]``
    indexes ``src_nodes``; ``edge_ids[e]`` (when asked for) is the edge's CSR position.  Arrays
    are numpy for the CPU sampler, DLPack-capable device arrays (or torch tensors) for the GPU
    sampler."""

    num_dst: int
    src_nodes: object
    offsets: object
    src_index: object
    edge_ids: object = None

    @property
    def num_src(self):
        return int(self.src_nodes.shape[0])

    @property
    def num_edges(self):
        return int(self.src_index.shape[0])

    def dst_index(self):
        """The destination index (into the first num_dst src_nodes) of every edge."""
        if _arrays.framework(self.offsets) == "torch":
            torch = __import__("torch")
            counts = self.offsets[1:] - self.offsets[:-1]
            return torch.repeat_interleave(
                torch.arange(self.num_dst, device=self.offsets.device, dtype=torch.int64), counts)
        offsets = np.asarray(self.offsets)
        return np.repeat(np.arange(self.num_dst, dtype=np.int64), np.diff(offsets))

    def edge_index(self):
        """[2, num_edges] int64 COO in PyG's convention: row 0 the source (the sampled neighbor,
        an index into src_nodes), row 1 the target (an index into the destination nodes)."""
        if _arrays.framework(self.src_index) == "torch":
            torch = __import__("torch")
            return torch.stack([self.src_index.to(torch.int64), self.dst_index()])
        return np.stack([np.asarray(self.src_index, dtype=np.int64), self.dst_index()])

    def to_pyg_adj(self):
        """(edge_index, e_id, (num_src, num_dst)): one entry of the ``adjs`` list that PyG's
        hop-wise GraphSAGE code consumes (``x_target = x[:size[1]]``; ``conv((x, x_target),
        edge_index)``).  ``e_id`` is ``edge_ids`` (None unless the sample asked for them)."""
        return self.edge_index(), self.edge_ids, (self.num_src, self.num_dst)

    def dgl_block_args(self):
        """((src, dst), num_src_nodes, num_dst_nodes): what ``dgl.create_block((src, dst),
        num_src_nodes=..., num_dst_nodes=...)`` takes, with src and dst local ids (src into
        src_nodes, dst into the destination nodes).  DGL itself is not imported."""
        edge_index = self.edge_index()
        return (edge_index[0], edge_index[1]), self.num_src, self.num_dst


def to_pyg(blocks, format="adjs", x=None):
    """A sample in a shape PyG's GNN code consumes.

    ``format="adjs"`` (default): as PyG's hop-wise loaders gave it, ``(n_id, adjs)`` with
    ``n_id`` the global ids of every node the first layer reads (its features are ``x[n_id]``)
    and ``adjs`` one ``to_pyg_adj()`` per layer, first layer first.  Every block's src_nodes is
    a prefix of the next hop's, so each layer's local ids index ``n_id`` directly.  Needs
    neither torch nor PyG.

    ``format="data"``: a ``torch_geometric.data.Data`` as PyG's NeighborLoader yields it
    (``edge_index``, ``n_id``, ``e_id`` when the sample has edge ids, ``batch_size``,
    ``num_sampled_nodes``, ``num_sampled_edges``, and ``x`` when given: the features of
    ``n_id``), each node's neighbors taken from the hop after the one that reached it
    (wholestore.pyg.batch_data, whose module docstring says what is left out).  Needs
    torch_geometric."""
    if not blocks:
        raise ValueError("to_pyg: the sample has no blocks")
    if format == "adjs":
        if x is not None:
            raise ValueError("to_pyg: x goes with format='data'")
        return blocks[-1].src_nodes, [b.to_pyg_adj() for b in reversed(blocks)]
    if format == "data":
        from .pyg import batch_data
        return batch_data(blocks, x)
    raise ValueError(f"to_pyg: format must be 'adjs' or 'data', not {format!r}")


def to_dgl_blocks_args(blocks):
    """``dgl_block_args()`` of every block, first layer first (DGL's order for ``blocks``), and
    the global ids of the first layer's source nodes (``blocks[0].srcdata[dgl.NID]``)."""
    if not blocks:
        raise ValueError("to_dgl_blocks_args: the sample has no blocks")
    return [b.dgl_block_args() for b in reversed(blocks)], blocks[-1].src_nodes


def _blocks(dicts):
    return [Block(**d) for d in dicts]


def _fanouts(fanouts):
    """Per-hop fanouts as a list of ints (TypeError naming ``fanouts`` otherwise)."""
    if isinstance(fanouts, (str, bytes)) or not hasattr(fanouts, "__iter__"):
        raise TypeError(f"fanouts must be a list of ints, not {type(fanouts).__name__}")
    return [_checks.integer(f, "fanouts") for f in fanouts]


def _graph(graph):
    """``graph`` when it is a Graph (from load_graph or make_graph), else TypeError."""
    if not isinstance(graph, Graph):
        raise TypeError(f"graph must be a Graph (from load_graph or make_graph), not "
                        f"{type(graph).__name__}")
    return graph


def generate_graph(num_nodes, num_edges, *, rmat=True, a=0.57, b=0.19, c=0.19, d=0.05,
                   scramble_ids=True, seed=0, with_weights=False, feature_dim=0,
                   symmetrize=False, drop_self_loops=False, threads=0):
    """An R-MAT (or uniform random, rmat=False) HostGraph, the same for the same options on any
    machine and thread count."""
    return _core.generate_graph(int(num_nodes), int(num_edges), bool(rmat), float(a), float(b),
                                float(c), float(d), bool(scramble_ids), int(seed),
                                bool(with_weights), int(feature_dim), bool(symmetrize),
                                bool(drop_self_loops), int(threads))


def generate_sbm(num_nodes, classes, avg_degree=10.0, homophily=0.8, *, feature_dim=0,
                 snr=1.0, train_fraction=0.6, val_fraction=0.2, seed=0, symmetrize=True,
                 drop_self_loops=True, threads=0):
    """A labelled HostGraph for node classification from a stochastic block model.  Node v is
    in class ``v % classes`` (``node_labels``, int32; ``num_classes``); ``homophily`` is the
    expected share of edges inside a class; features (``feature_dim`` > 0) are the class mean
    (entries +-``snr``) plus standard normal noise; ``node_split`` (uint8) is 0 train, 1
    validation, 2 test, drawn per node with the given fractions.  write_dataset stores all of
    it.  A function of the options and ``seed``, whatever ``threads`` is."""
    return _core.generate_sbm(int(num_nodes), int(classes), float(avg_degree), float(homophily),
                              int(feature_dim), float(snr), float(train_fraction),
                              float(val_fraction), int(seed), bool(symmetrize),
                              bool(drop_self_loops), int(threads))


def convert_edge_list(path, *, symmetrize=False, drop_self_loops=False, drop_duplicates=False,
                      has_weights=False, numeric_ids_as_is=False):
    """A HostGraph from an edge-list text file (``src dst [weight]`` per line)."""
    return _core.convert_edge_list(os.fspath(path), symmetrize, drop_self_loops, drop_duplicates,
                                   has_weights, numeric_ids_as_is)


def write_dataset(dir, graph, features_dtype="float32", overwrite=False):
    """Writes a HostGraph as a dataset directory (docs/dataset-format.md); returns its
    manifest as a dict."""
    return _core.write_dataset(os.fspath(dir), graph, _arrays.dtype_name(features_dtype),
                               overwrite)


def read_manifest(dir):
    """A dataset's manifest (checked against the files' sizes) as a dict."""
    return _core.read_manifest(os.fspath(dir))


def read_dataset(dir):
    """A whole dataset as a HostGraph (checksums verified)."""
    return _core.read_dataset(os.fspath(dir))


def split_edges(graph, holdout=0.1, seed=0):
    """Holds out ``holdout`` of a HostGraph's edges for link prediction (an undirected edge
    leaves with both of its directions) and draws as many non-edges, deterministically from
    ``seed`` (graph/edge_split.hpp): an EdgeSplit with ``train_graph`` (a HostGraph of the
    other edges, copied on each access), ``test_edges`` and ``test_non_edges`` ([n, 2] int64
    numpy arrays) and ``num_nodes``.  ``wholestore.train`` takes it in place of a graph and
    splits a graph this way itself."""
    if not isinstance(graph, HostGraph):
        raise TypeError(f"graph must be a HostGraph, not {graph.__class__.__name__}")
    seed = _checks.integer(seed, "seed")
    if seed < 0:
        raise ValueError(f"seed must be at least 0, got {seed}")
    return _core.split_edges(graph, _checks.number(holdout, "holdout"), seed)


class Graph:
    """A CSR graph in WholeMemory: row offsets, neighbors, optional weights and node features,
    each an allocation of the chosen type and location over the ranks of a communicator."""

    def __init__(self, core_graph):
        self._g = core_graph

    num_nodes = property(lambda self: self._g.num_nodes)
    num_edges = property(lambda self: self._g.num_edges)
    feature_dim = property(lambda self: self._g.feature_dim)
    feature_dtype = property(lambda self: self._g.feature_dtype)
    directed = property(lambda self: self._g.directed)
    has_weights = property(lambda self: self._g.has_weights)
    has_features = property(lambda self: self._g.has_features)
    type = property(lambda self: self._g.type)
    location = property(lambda self: self._g.location)

    def __repr__(self):
        return (f"Graph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"feature_dim={self.feature_dim}, type={self.type}, location={self.location})")

    def sample(self, seeds, fanouts, method="uniform", random_seed=0, edge_ids=False, threads=0):
        """The CPU sampler: a list of Blocks (numpy arrays) for int64 ``seeds`` and per-hop
        ``fanouts`` (-1: every neighbor).  Host-located graphs; collective on distributed
        memory."""
        seeds = np.ascontiguousarray(_arrays.as_indices(seeds, "seeds"), dtype=np.int64)
        return _blocks(self._g.sample_host(seeds, _fanouts(fanouts), _checks.text(method, "method"),
                                           _checks.integer(random_seed, "random_seed"),
                                           bool(edge_ids), _checks.integer(threads, "threads")))

    def gather_features(self, nodes, out=None, dtype=None, stream=None):
        """Features of ``nodes`` into ``out`` ([n, feature_dim]; allocated like ``nodes`` with
        ``dtype`` or the features' own when None)."""
        given = out
        out = _arrays.adapt_output(out)
        nodes = _arrays.as_indices(nodes, "nodes")
        if out is None:
            out = _arrays.empty(nodes, (int(nodes.shape[0]), self.feature_dim),
                                _arrays.dtype_name(dtype) if dtype else self.feature_dtype)
        self._g.gather_features(nodes, out, _arrays.stream_of(stream, nodes, out))
        return out if given is None else given

    def random_walks(self, starts, length=80, p=1.0, q=1.0, seed=0, first_walk=0, out=None,
                     stream=None, threads=0):
        """Random walks (DeepWalk; node2vec with return ``p`` and in-out ``q``) from int64
        ``starts``: ``[len(starts), length + 1]`` int64, row i starting at starts[i], padded
        with -1 after a node without out-edges.  Walk i is a function of (graph, starts[i],
        first_walk + i, seed): the same on the CPU and the GPU.  The CPU walker for host graphs
        and CPU arrays; the GPU walker (on ``stream``) for device graphs or CUDA arrays (the
        output then allocated like ``starts``).  On a graph in distributed memory the call is
        collective: every rank calls with the same length, p and q and its own starts (maybe
        none; ``first_walk`` its slice's offset), and the walks are those of one rank on the
        graph in continuous memory."""
        starts = _arrays.as_indices(starts, "starts")
        given = out
        out = _arrays.adapt_output(out)
        if _arrays.framework(starts) == "numpy":
            starts = np.ascontiguousarray(starts, dtype=np.int64)
        length = _checks.integer(length, "length")
        if length < 0:
            raise ValueError(f"length must be >= 0, got {length}")
        if out is None:
            out = _arrays.empty(starts, (_arrays.length(starts), length + 1), "int64")
        self._g.random_walks(starts, out, length, _checks.number(p, "p"), _checks.number(q, "q"),
                             _checks.integer(seed, "seed"),
                             _checks.integer(first_walk, "first_walk"),
                             _arrays.stream_of(stream, starts, out),
                             _checks.integer(threads, "threads"))
        return out if given is None else given

    def free(self):
        """Frees the graph's memory now, after the calls in flight on other threads (a GPU
        sampler's included; calls after it raise ValueError).  Collective."""
        self._g.free()


class NegativeSampler:
    """Negative nodes for link prediction and SGNS: draws from out-degree^power (``by_degree``,
    word2vec's 0.75 by default) or uniform over the graph's nodes, O(1) per draw from an alias
    table in WholeMemory (``type`` continuous or chunked, ``location`` host or device).  Draw j
    of a seed is a function of (table, seed, j) only.  Collective to build."""

    def __init__(self, comm, graph, by_degree=True, power=0.75, type="continuous",
                 location="host"):
        self._graph = _graph(graph)
        self._n = _core.NegativeSampler(_checks.communicator(comm), graph._g, bool(by_degree),
                                        _checks.number(power, "power"),
                                        _checks.text(type, "type"),
                                        _checks.text(location, "location"))

    num_nodes = property(lambda self: self._n.num_nodes)

    def probability(self, node):
        """The exact probability of drawing ``node``."""
        return self._n.probability(int(node))

    def sample(self, count=None, seed=0, first_draw=0, out=None, stream=None, threads=0):
        """Draws first_draw .. first_draw + count - 1 into ``out`` (int64; numpy of ``count``
        when None; pass a CUDA array for a device table)."""
        given = out
        out = _arrays.adapt_output(out)
        if out is None:
            if count is None:
                raise ValueError("pass count or out")
            out = np.empty(int(count), dtype=np.int64)
        self._n.sample(int(seed), int(first_draw), out, _arrays.stream_of(stream, out),
                       int(threads))
        return out if given is None else given


def load_graph(comm, dir, type="continuous", location="host", *, features_type=None,
               features_location=None, load_weights=True, load_features=True,
               verify_checksums=False, threads=0):
    """Loads a dataset directory into WholeMemory, each rank reading its own byte ranges.
    Collective."""
    return Graph(_core.load_graph(_checks.communicator(comm), _checks.path(dir),
                                  _checks.text(type, "type"), _checks.text(location, "location"),
                                  _checks.optional_text(features_type, "features_type"),
                                  _checks.optional_text(features_location, "features_location"),
                                  bool(load_weights), bool(load_features), bool(verify_checksums),
                                  _checks.integer(threads, "threads")))


def make_graph(comm, graph, type="continuous", location="host", *, features_type=None,
               features_location=None, load_weights=True, load_features=True,
               feature_dtype="float32"):
    """Copies a HostGraph (the same on every rank) into WholeMemory.  Collective."""
    if not isinstance(graph, HostGraph):
        raise TypeError(f"graph must be a HostGraph, not {graph.__class__.__name__}")
    return Graph(_core.make_graph(_checks.communicator(comm), graph,
                                  _checks.text(type, "type"), _checks.text(location, "location"),
                                  _checks.optional_text(features_type, "features_type"),
                                  _checks.optional_text(features_location, "features_location"),
                                  bool(load_weights), bool(load_features),
                                  _arrays.dtype_name(feature_dtype)))


class GpuSampler:
    """The GPU sampler on the current CUDA device, keeping its scratch memory between calls.
    The graph may be device- or host-located."""

    def __init__(self, graph):
        self._graph = _graph(graph)
        self._s = _core.GpuSampler(graph._g)

    def sample(self, seeds, fanouts, method="uniform", random_seed=0, edge_ids=False,
               stream=None, copy=True):
        """Blocks for CUDA ``seeds`` (int64).  The sampler's own arrays are overwritten by its
        next call: with ``copy`` (default) each block gets its own torch tensors when seeds are
        torch tensors, CuPy arrays when they are CuPy arrays; without it the arrays are views
        into the sampler, valid until its next sample call."""
        blocks = _blocks(self._s.sample(_checks.array(seeds, "seeds"),
                                        _fanouts(fanouts), _checks.text(method, "method"),
                                        _checks.integer(random_seed, "random_seed"),
                                        bool(edge_ids), _arrays.stream_of(stream, seeds)))
        kind = _arrays.framework(seeds)
        if copy and kind in ("torch", "cupy"):
            module = __import__(kind)
            for b in blocks:
                for name in ("src_nodes", "offsets", "src_index", "edge_ids"):
                    value = getattr(b, name)
                    if value is not None:
                        setattr(b, name, module.from_dlpack(value).clone() if kind == "torch"
                                else module.from_dlpack(value).copy())
        return blocks
