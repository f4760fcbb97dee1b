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
