"""Graphs from Python: generated and converted host graphs, datasets on disk, graphs in
WholeMemory of every type, feature gathers and the CPU sampler's blocks checked against the
CSR."""

import numpy as np
import pytest

import wholestore as ws

TYPES = ["continuous", "chunked", "distributed"]


@pytest.fixture(scope="module")
def host_graph():
    return ws.generate_graph(300, 3000, seed=5, with_weights=True, feature_dim=6)


def test_generate_is_deterministic(host_graph):
    g = host_graph
    assert (g.num_nodes, g.num_edges, g.feature_dim) == (300, 3000, 6)
    assert g.row_offsets.shape == (301,) and g.row_offsets[-1] == 3000
    assert np.all(np.diff(g.row_offsets) >= 0)
    assert g.col_indices.min() >= 0 and g.col_indices.max() < 300
    assert g.edge_weights.shape == (3000,) and g.node_features.shape == (300, 6)
    again = ws.generate_graph(300, 3000, seed=5, with_weights=True, feature_dim=6, threads=1)
    np.testing.assert_array_equal(again.col_indices, g.col_indices)
    np.testing.assert_array_equal(again.node_features, g.node_features)


def test_host_graph_from_arrays_and_dataset_round_trip(tmp_path):
    g = ws.HostGraph(np.array([0, 2, 3, 3]), np.array([1, 2, 0]),
                     edge_weights=np.array([0.5, 1.0, 2.0], np.float32),
                     node_features=np.arange(6, dtype=np.float32).reshape(3, 2))
    assert (g.num_nodes, g.num_edges, g.feature_dim) == (3, 3, 2)
    manifest = ws.write_dataset(tmp_path / "d", g)
    assert manifest["num_nodes"] == 3 and manifest["col_indices"]["dtype"] == "int32"
    assert ws.read_manifest(tmp_path / "d")["node_features"]["count"] == 6
    back = ws.read_dataset(tmp_path / "d")
    np.testing.assert_array_equal(back.col_indices, [1, 2, 0])
    np.testing.assert_array_equal(back.node_features, g.node_features)
    with pytest.raises(ws.LogicError, match="col_indices"):
        ws.write_dataset(tmp_path / "bad", ws.HostGraph(np.array([0, 1]), np.array([5])))


def test_convert_edge_list(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("# a comment\nalice bob\nbob carol\ncarol alice\n")
    g = ws.convert_edge_list(path, symmetrize=True)
    assert g.num_nodes == 3 and g.num_edges == 6 and g.node_ids == ["alice", "bob", "carol"]
    path.write_text("1 2\n3\n")
    with pytest.raises(ws.LogicError, match="edges.txt:2: malformed line"):
        ws.convert_edge_list(path)


def check_blocks(blocks, g, seeds, fanouts):
    """The block layout of graph/include/graph/sampling.hpp, checked against the CSR."""
    offsets, cols = g.row_offsets, g.col_indices
    assert len(blocks) == len(fanouts)
    unique_seeds = list(dict.fromkeys(seeds.tolist()))
    np.testing.assert_array_equal(blocks[0].src_nodes[:blocks[0].num_dst], unique_seeds)
    for hop, (b, fanout) in enumerate(zip(blocks, fanouts)):
        if hop + 1 < len(blocks):
            nxt = blocks[hop + 1]
            assert nxt.num_dst == b.num_src
            np.testing.assert_array_equal(nxt.src_nodes[:nxt.num_dst], b.src_nodes)
        assert len(set(b.src_nodes.tolist())) == b.num_src  # no repeats
        assert b.offsets.shape == (b.num_dst + 1,) and b.offsets[-1] == b.num_edges
        for i in range(b.num_dst):
            node = b.src_nodes[i]
            neighbors = cols[offsets[node]:offsets[node + 1]]
            picked = b.src_nodes[b.src_index[b.offsets[i]:b.offsets[i + 1]]]
            assert len(picked) == min(len(neighbors), fanout)
            assert set(picked.tolist()) <= set(neighbors.tolist())
            if b.edge_ids is not None:
                positions = b.edge_ids[b.offsets[i]:b.offsets[i + 1]]
                np.testing.assert_array_equal(cols[positions], picked)
                assert len(set(positions.tolist())) == len(positions)  # without replacement
        coo = b.edge_index()
        assert coo.shape == (2, b.num_edges)
        np.testing.assert_array_equal(coo[0], b.src_index)
        np.testing.assert_array_equal(np.diff(b.offsets), np.bincount(coo[1],
                                                                     minlength=b.num_dst))


@pytest.mark.parametrize("type", TYPES)
def test_sample_blocks(comm, host_graph, type, tmp_path):
    ws.write_dataset(tmp_path / "d", host_graph)
    g = ws.load_graph(comm, tmp_path / "d", type, "host", verify_checksums=True)
    assert (g.num_nodes, g.num_edges, g.feature_dim) == (300, 3000, 6)
    assert g.type == type and g.location == "host" and g.has_weights and g.has_features
    seeds = np.array([7, 0, 299, 7, 42])
    blocks = g.sample(seeds, [4, 3], random_seed=1, edge_ids=True)
    check_blocks(blocks, host_graph, seeds, [4, 3])
    # Deterministic in (graph, seeds, fanouts, method, seed), whatever the memory type.
    other = ws.make_graph(comm, host_graph, "continuous", "host")
    again = other.sample(seeds, [4, 3], random_seed=1, edge_ids=True, threads=1)
    for a, b in zip(blocks, again):
        np.testing.assert_array_equal(a.src_nodes, b.src_nodes)
        np.testing.assert_array_equal(a.src_index, b.src_index)
    weighted = g.sample(seeds, [2], method="weighted")
    check_blocks(weighted, host_graph, seeds, [2])
    features = g.gather_features(blocks[-1].src_nodes)
    np.testing.assert_array_equal(features, host_graph.node_features[blocks[-1].src_nodes])


def test_sample_errors(comm, host_graph):
    g = ws.make_graph(comm, host_graph)
    with pytest.raises(ws.LogicError, match="300"):
        g.sample([300], [2])
    with pytest.raises(ws.LogicError, match="sideways"):
        g.sample([1], [2], method="sideways")
    with pytest.raises(ws.LogicError, match="index 300"):
        g.gather_features([300])


def test_wrong_argument_types_name_the_argument(comm, host_graph):
    """TypeError naming the argument and what it must be, not nanobind's C++ signatures."""
    g = ws.make_graph(comm, host_graph)
    cases = [
        (lambda: ws.make_graph("comm", host_graph), "comm must be a wholestore Communicator"),
        (lambda: ws.make_graph(comm, g), "graph must be a HostGraph, not Graph"),
        (lambda: ws.make_graph(comm, host_graph, 1), "type must be a str, not int"),
        (lambda: ws.load_graph(comm, 3), "dir must be a path"),
        (lambda: ws.load_graph(comm, "d", features_type=1), "features_type must be a str"),
        (lambda: g.sample([1], 5), "fanouts must be a list of ints, not int"),
        (lambda: g.sample([1], [2.5]), "fanouts must be an integer"),
        (lambda: g.sample([1], [2], method=None), "method must be a str"),
        (lambda: g.sample([0.5], [2]), "seeds must be integers, not float64"),
        (lambda: g.random_walks([1], length="3"), "length must be an integer"),
        (lambda: g.gather_features(None), "nodes must be an array"),
        (lambda: ws.NegativeSampler(comm, host_graph), "graph must be a Graph"),
        (lambda: ws.GpuSampler("graph"), "graph must be a Graph"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError, match=message) as info:
            call()
        assert "incompatible function arguments" not in str(info.value)


def test_pyg_and_dgl_shapes(comm, host_graph):
    """to_pyg: n_id and one adj per layer (first layer first) whose local ids, mapped through
    n_id, are edges of the graph from a sampled neighbor (row 0) to its destination (row 1);
    to_dgl_blocks_args: the same edges as (src, dst) with the node counts."""
    g = ws.make_graph(comm, host_graph)
    seeds = np.array([3, 17, 250])
    blocks = g.sample(seeds, [5, 4, 3], random_seed=2, edge_ids=True)
    n_id, adjs = ws.to_pyg(blocks)
    np.testing.assert_array_equal(n_id, blocks[-1].src_nodes)
    assert len(adjs) == 3
    edges = set(zip(np.repeat(np.arange(300), np.diff(host_graph.row_offsets)).tolist(),
                    host_graph.col_indices.tolist()))
    for layer, (edge_index, e_id, (num_src, num_dst)) in enumerate(adjs):
        b = blocks[len(blocks) - 1 - layer]
        assert (num_src, num_dst) == (b.num_src, b.num_dst)
        assert edge_index.shape == (2, b.num_edges) and edge_index.dtype == np.int64
        assert edge_index[0].max() < num_src and edge_index[1].max() < num_dst
        # Local ids are ids into n_id (each block's nodes are a prefix of the next hop's).
        src, dst = n_id[edge_index[0]], n_id[edge_index[1]]
        assert all((d, s) in edges for s, d in zip(src.tolist(), dst.tolist()))
        np.testing.assert_array_equal(host_graph.col_indices[e_id], src)
    assert adjs[-1][2][1] == len(seeds)  # the last layer's targets are the seeds
    dgl_args, src_ids = ws.to_dgl_blocks_args(blocks)
    np.testing.assert_array_equal(src_ids, n_id)
    for (edge_index, _, (num_src, num_dst)), ((s, d), ns, nd) in zip(adjs, dgl_args):
        np.testing.assert_array_equal(s, edge_index[0])
        np.testing.assert_array_equal(d, edge_index[1])
        assert (ns, nd) == (num_src, num_dst)
    with pytest.raises(ValueError, match="no blocks"):
        ws.to_pyg([])


@pytest.mark.parametrize("type", TYPES)
def test_random_walks(comm, type):
    """Walks are paths of the graph (every step an edge), padded with -1 exactly after a node
    without out-edges, a function of (start, walk index, seed): any threads, any memory type,
    and a walk's row does not depend on the batch it came in."""
    hg = ws.HostGraph(np.array([0, 2, 3, 3, 5]), np.array([1, 2, 2, 0, 1]))  # node 2: no edges
    g = ws.make_graph(comm, hg, type, "host")
    starts = np.array([0, 3, 2, 1, 0, 3] * 50)
    walks = g.random_walks(starts, length=6, seed=4)
    assert walks.shape == (300, 7) and walks.dtype == np.int64
    nbrs = {u: set(hg.col_indices[hg.row_offsets[u]:hg.row_offsets[u + 1]].tolist())
            for u in range(4)}
    for row, s in zip(walks, starts):
        assert row[0] == s
        for a, b in zip(row[:-1], row[1:]):
            if a == -1 or (a != -1 and not nbrs[a]):
                assert b == -1  # dead end, then padding
            else:
                assert b in nbrs[a]
    np.testing.assert_array_equal(walks, g.random_walks(starts, length=6, seed=4, threads=1))
    tail = g.random_walks(starts[100:], length=6, seed=4, first_walk=100)
    np.testing.assert_array_equal(tail, walks[100:])
    assert not np.array_equal(walks, g.random_walks(starts, length=6, seed=5))
    # node2vec on a triangle with p = 0.01: after 0 -> 1, stepping back to 0 weighs 1/p = 100
    # against 1 for node 2 (a neighbor of 0): 100/101 of the second steps go back.
    tri = ws.make_graph(comm, ws.HostGraph(np.array([0, 2, 4, 6]), np.array([1, 2, 0, 2, 0, 1])),
                        type, "host")
    back = tri.random_walks(np.zeros(4000, np.int64), length=2, p=0.01, q=1.0, seed=1)
    ones = back[back[:, 1] == 1]
    assert len(ones) > 1500 and (ones[:, 2] == 0).mean() > 0.97
    with pytest.raises(ws.LogicError, match="start"):
        g.random_walks([7], length=3)
    with pytest.raises(ws.LogicError, match="p"):
        g.random_walks([0], length=3, p=0)
    with pytest.raises(ValueError, match="length"):
        g.random_walks([0], length=-1)


def test_negative_sampler(comm, host_graph):
    """Draws follow out-degree^0.75 (chi-square against probability(), itself checked against
    the degrees), never a node without out-edges, a function of (seed, draw index)."""
    g = ws.make_graph(comm, host_graph)
    neg = ws.NegativeSampler(comm, g)
    degrees = np.diff(host_graph.row_offsets).astype(np.float64)
    expected = degrees ** 0.75 / (degrees ** 0.75).sum()
    p = np.array([neg.probability(v) for v in range(300)])
    np.testing.assert_allclose(p, expected, rtol=1e-6, atol=1e-9)
    draws = neg.sample(200000, seed=3)
    assert draws.min() >= 0 and draws.max() < 300
    assert np.all(degrees[draws] > 0)
    counts = np.bincount(draws, minlength=300)
    keep = expected * len(draws) >= 5
    chi2 = (((counts[keep] - expected[keep] * len(draws)) ** 2) /
            (expected[keep] * len(draws))).sum()
    dof = keep.sum() - 1
    assert chi2 < dof + 6 * np.sqrt(2 * dof), (chi2, dof)
    np.testing.assert_array_equal(neg.sample(1000, seed=3, first_draw=500), draws[500:1500])
    uniform = ws.NegativeSampler(comm, g, by_degree=False)
    assert uniform.probability(0) == pytest.approx(1 / 300)
    with pytest.raises(ValueError, match="count or out"):
        neg.sample()


def test_generate_sbm(tmp_path):
    """The labelled generator from Python: shapes and dtypes, labels v % classes, the edges'
    in-class share near the homophily, features separating the classes, the split's shares;
    labels and split through a dataset on disk; bad options named."""
    g = ws.generate_sbm(6000, 4, avg_degree=8, homophily=0.75, feature_dim=8, snr=1.0, seed=3,
                        symmetrize=False, drop_self_loops=False)
    labels, split = g.node_labels, g.node_split
    assert g.num_classes == 4
    assert g.num_nodes == 6000 and g.num_edges == 48000 and g.feature_dim == 8
    assert labels.dtype == np.int32 and split.dtype == np.uint8
    np.testing.assert_array_equal(labels, np.arange(6000) % 4)
    src = np.repeat(np.arange(6000), np.diff(g.row_offsets))
    share = (labels[src] == labels[g.col_indices]).mean()
    assert abs(share - 0.75) < 5 * np.sqrt(0.75 * 0.25 / 48000)
    means = np.stack([g.node_features[labels == c].mean(axis=0) for c in range(4)])
    np.testing.assert_allclose(np.abs(means), 1.0, atol=5 / np.sqrt(1500))
    shares = np.bincount(split, minlength=3) / 6000
    np.testing.assert_allclose(shares, [0.6, 0.2, 0.2], atol=5 * np.sqrt(0.24 / 6000))
    again = ws.generate_sbm(6000, 4, avg_degree=8, homophily=0.75, feature_dim=8, snr=1.0,
                            seed=3, symmetrize=False, drop_self_loops=False, threads=1)
    np.testing.assert_array_equal(again.col_indices, g.col_indices)
    np.testing.assert_array_equal(again.node_split, split)
    manifest = ws.write_dataset(tmp_path / "sbm", g)
    assert manifest["num_classes"] == 4 and manifest["node_labels"]["dtype"] == "int32"
    back = ws.read_dataset(tmp_path / "sbm")
    np.testing.assert_array_equal(back.node_labels, labels)
    np.testing.assert_array_equal(back.node_split, split)
    assert back.num_classes == 4
    assert ws.generate_graph(10, 20).node_labels is None
    with pytest.raises(ws.LogicError, match="homophily"):
        ws.generate_sbm(100, 4, homophily=2.0)
    with pytest.raises(ws.LogicError, match="classes"):
        ws.generate_sbm(100, 1)
