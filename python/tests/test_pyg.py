"""PyG's remote backend over a wholestore Graph (wholestore.pyg): the FeatureStore against the
graph's features, the GraphStore against its CSR, WholestoreSampler against the store's own
sample, PyG's NeighborLoader over the backend, and to_pyg(format="data").  Skipped without
torch_geometric; the GPU part without a GPU."""

import numpy as np
import pytest

import wholestore as ws

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
import torch_geometric  # noqa: E402
from torch_geometric.loader import NeighborLoader  # noqa: E402
from torch_geometric.sampler import NodeSamplerInput  # noqa: E402

import wholestore.pyg as wpyg  # noqa: E402
from conftest import has_gpu  # noqa: E402

NODES = 400


@pytest.fixture(scope="module")
def host():
    # Directed, with self loops and repeated edges: PyG must take the edges as they are.
    return ws.generate_graph(NODES, 4000, seed=5, feature_dim=6)


@pytest.fixture(scope="module")
def graph(comm, host):
    return ws.make_graph(comm, host, "chunked", "host")


@pytest.fixture(scope="module")
def edges(host):
    """Every edge of the graph in PyG's direction, (source, target) = (neighbor, node)."""
    offsets = np.asarray(host.row_offsets)
    node = np.repeat(np.arange(host.num_nodes), np.diff(offsets))
    return set(zip(np.asarray(host.col_indices).tolist(), node.tolist()))


def test_graph_store_serves_the_csr_as_csc(graph, host):
    row_offsets = torch.from_numpy(np.asarray(host.row_offsets))
    col_indices = torch.from_numpy(np.asarray(host.col_indices))
    for store in (wpyg.WholestoreGraphStore(graph),  # read back through the store's sampler
                  wpyg.WholestoreGraphStore(graph, csr=(host.row_offsets, host.col_indices))):
        (attr,) = store.get_all_edge_attrs()
        assert attr.edge_type is None and attr.layout.value == "csc"
        assert attr.size == (NODES, NODES)
        row, colptr = store.get_edge_index(edge_type=None, layout="csc")
        assert torch.equal(colptr, row_offsets) and torch.equal(row, col_indices)
        row, colptr, perm = store.csc()  # what PyG's own NeighborSampler reads
        assert torch.equal(colptr, row_offsets) and perm is None
        src, dst = store.get_edge_index(edge_type=None, layout="coo")
        assert torch.equal(src, col_indices)
        assert torch.equal(dst, torch.repeat_interleave(torch.arange(NODES), row_offsets.diff()))
        with pytest.raises(KeyError):
            store.get_edge_index(edge_type=("a", "to", "b"), layout="csc")
        with pytest.raises(NotImplementedError, match="only reads"):
            store.put_edge_index((row, colptr), edge_type=None, layout="csc", size=(1, 1))
    with pytest.raises(ValueError, match="row offsets"):
        wpyg.WholestoreGraphStore(graph, csr=(host.row_offsets[:-1], host.col_indices))


def test_feature_store_reads_the_graphs_features(graph, host):
    features = torch.from_numpy(np.asarray(host.node_features))
    labels = torch.arange(NODES) % 7
    store = wpyg.WholestoreFeatureStore(graph, y=labels)
    assert {a.attr_name for a in store.get_all_tensor_attrs()} == {"x", "y"}
    assert all(a.group_name is None for a in store.get_all_tensor_attrs())
    assert store.get_tensor_size(group_name=None, attr_name="x") == (NODES, 6)
    idx = torch.tensor([NODES - 1, 0, 5, 5])
    assert torch.equal(store.get_tensor(group_name=None, attr_name="x", index=idx),
                       features[idx])
    assert torch.equal(store.get_tensor(group_name=None, attr_name="x", index=slice(10, 20)),
                       features[10:20])
    assert torch.equal(store.get_tensor(group_name=None, attr_name="x", index=None), features)
    assert torch.equal(store.get_tensor(group_name=None, attr_name="x", index=3), features[3])
    mask = torch.zeros(NODES, dtype=torch.bool)
    mask[[2, 9]] = True
    assert torch.equal(store.get_tensor(group_name=None, attr_name="x", index=mask),
                       features[[2, 9]])
    x, y = store.multi_get_tensor([
        torch_geometric.data.TensorAttr(None, "x", idx),
        torch_geometric.data.TensorAttr(None, "y", idx)])
    assert torch.equal(x, features[idx]) and torch.equal(y, labels[idx])
    store.put_tensor(torch.tensor([70, 71]), group_name=None, attr_name="y",
                     index=torch.tensor([0, 1]))
    assert store.get_tensor(group_name=None, attr_name="y", index=torch.tensor([1])).item() == 71
    with pytest.raises(ValueError, match="only reads them"):
        store.put_tensor(features, group_name=None, attr_name="x", index=None)
    with pytest.raises(ValueError, match="rows"):
        store.put_tensor(torch.zeros(3), group_name=None, attr_name="z", index=None)
    assert store.remove_tensor(group_name=None, attr_name="y", index=None)
    assert {a.attr_name for a in store.get_all_tensor_attrs()} == {"x"}


def test_sampler_matches_the_stores_sample(graph):
    """WholestoreSampler's output is the store's blocks in PyG's layout: the seeds first, hop
    1's edges all of blocks[0]'s, hop 2's those of blocks[1] into the nodes hop 1 reached."""
    seeds = torch.tensor([17, 3, 399, 0, 250])
    sampler = wpyg.WholestoreSampler(graph, [4, 3], random_seed=7)
    out = sampler.sample_from_nodes(NodeSamplerInput(input_id=None, node=seeds))
    blocks = graph.sample(seeds.numpy(), [4, 3], random_seed=7, edge_ids=True)
    first, second = blocks
    assert torch.equal(out.node, torch.from_numpy(second.src_nodes))
    assert torch.equal(out.node[:5], seeds)
    assert out.num_sampled_nodes == [5, first.num_src - 5, second.num_src - second.num_dst]
    keep = second.offsets[first.num_dst]  # the edges into the nodes hop 1 reached
    assert out.num_sampled_edges == [first.num_edges, second.num_edges - keep]
    assert sum(out.num_sampled_edges) == out.row.shape[0] == out.col.shape[0]
    expected_row = np.concatenate([first.src_index, second.src_index[keep:]])
    expected_col = np.concatenate([first.dst_index(), second.dst_index()[keep:]])
    expected_edge = np.concatenate([first.edge_ids, second.edge_ids[keep:]])
    np.testing.assert_array_equal(out.row.numpy(), expected_row)
    np.testing.assert_array_equal(out.col.numpy(), expected_col)
    np.testing.assert_array_equal(out.edge.numpy(), expected_edge)
    assert out.batch is None
    # Hop 2's destinations are hop 1's new nodes only.
    hop2 = out.col[out.num_sampled_edges[0]:]
    assert bool(((hop2 >= 5) & (hop2 < 5 + out.num_sampled_nodes[1])).all())
    # The same batch as a Data (to_pyg) and with edge ids left out.
    data = ws.to_pyg(blocks, format="data")
    assert torch.equal(data.edge_index, torch.stack([out.row, out.col]))
    assert torch.equal(data.n_id, out.node) and torch.equal(data.e_id, out.edge)
    assert data.batch_size == 5 and data.num_nodes == out.node.shape[0]
    assert data.num_sampled_nodes == out.num_sampled_nodes
    plain = wpyg.WholestoreSampler(graph, [4, 3], random_seed=7, edge_ids=False)
    assert plain.sample_from_nodes(NodeSamplerInput(None, seeds)).edge is None
    # Without a seed each call draws one from torch's generator: manual_seed repeats a run.
    free = wpyg.WholestoreSampler(graph, [4, 3])
    torch.manual_seed(1)
    a = free.sample_from_nodes(NodeSamplerInput(None, seeds))
    torch.manual_seed(1)
    b = free.sample_from_nodes(NodeSamplerInput(None, seeds))
    assert torch.equal(a.node, b.node) and torch.equal(a.row, b.row)
    with pytest.raises(ValueError, match="1 seed.*repeat"):
        sampler.sample_from_nodes(NodeSamplerInput(None, torch.tensor([4, 8, 4])))
    with pytest.raises(NotImplementedError):
        sampler.sample_from_edges(None)


def check_batch(batch, graph_features, labels, edges, fanouts, expected_seeds):
    n = int(batch.n_id.shape[0])
    assert batch.batch_size == len(expected_seeds)
    assert torch.equal(batch.n_id[:batch.batch_size], expected_seeds)  # seeds first
    assert batch.n_id.unique().shape[0] == n
    assert torch.equal(batch.x, graph_features[batch.n_id])
    assert torch.equal(batch.y, labels[batch.n_id])
    src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
    assert set(zip(src.tolist(), dst.tolist())) <= edges
    assert sum(batch.num_sampled_nodes) == n
    assert sum(batch.num_sampled_edges) == batch.edge_index.shape[1]
    # Each hop's destinations are the nodes the hop before reached, each within its fanout.
    begin, first = 0, 0
    for hop, (count, fanout) in enumerate(zip(batch.num_sampled_edges, fanouts)):
        targets = batch.edge_index[1, begin:begin + count]
        reached = batch.num_sampled_nodes[hop]
        assert bool(((targets >= first) & (targets < first + reached)).all())
        if count:
            assert int(torch.bincount(targets).max()) <= fanout
        begin, first = begin + count, first + reached


def test_neighbor_loader_over_the_remote_backend(graph, host, edges):
    """PyG's NeighborLoader over (FeatureStore, GraphStore) with the store's sampler: every
    input node once per epoch, seeds first, sampled edges that exist, x the features of n_id,
    and a PyG GNN (SAGEConv) trains on the batches."""
    features = torch.from_numpy(np.asarray(host.node_features))
    labels = torch.arange(NODES) % 3
    data = wpyg.remote_backend(graph, y=labels)
    input_nodes = torch.arange(1, NODES, 3)
    fanouts = [10, 5]
    loader = NeighborLoader(data, num_neighbors=fanouts, input_nodes=input_nodes,
                            batch_size=32, shuffle=True,
                            neighbor_sampler=wpyg.WholestoreSampler(graph, fanouts))
    conv1 = torch_geometric.nn.SAGEConv(6, 16)
    conv2 = torch_geometric.nn.SAGEConv(16, 3)
    opt = torch.optim.Adam([*conv1.parameters(), *conv2.parameters()], lr=0.01)
    seen = []
    for batch in loader:
        check_batch(batch, features, labels, edges, fanouts, input_nodes[batch.input_id])
        seen.append(batch.n_id[:batch.batch_size])
        h = conv2(torch.relu(conv1(batch.x, batch.edge_index)), batch.edge_index)
        loss = torch.nn.functional.cross_entropy(h[:batch.batch_size], batch.y[:batch.batch_size])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.equal(torch.cat(seen).sort().values, input_nodes)


def test_pygs_own_sampler_over_the_graph_store(graph, host, edges):
    """Where pyg-lib or torch-sparse is installed, PyG's NeighborSampler samples the
    GraphStore's CSC (the same edges in the same direction)."""
    typing = torch_geometric.typing
    if not (typing.WITH_PYG_LIB or typing.WITH_TORCH_SPARSE):
        pytest.skip("PyG's own neighbor sampler needs pyg-lib or torch-sparse")
    features = torch.from_numpy(np.asarray(host.node_features))
    labels = torch.arange(NODES) % 3
    loader = NeighborLoader(wpyg.remote_backend(graph, y=labels), num_neighbors=[10, 5],
                            input_nodes=torch.arange(0, NODES, 5), batch_size=16)
    for batch in loader:
        src, dst = batch.n_id[batch.edge_index[0]], batch.n_id[batch.edge_index[1]]
        assert set(zip(src.tolist(), dst.tolist())) <= edges
        assert torch.equal(batch.x, features[batch.n_id])


def test_to_pyg_formats(graph, host):
    blocks = graph.sample(np.array([5, 1, 7]), [3, 2])
    n_id, adjs = ws.to_pyg(blocks)  # the default is the hop-wise format it always was
    assert n_id is blocks[-1].src_nodes and len(adjs) == 2
    x = graph.gather_features(torch.from_numpy(blocks[-1].src_nodes))
    data = ws.to_pyg(blocks, format="data", x=x)
    assert isinstance(data, torch_geometric.data.Data)
    assert torch.equal(data.x, torch.from_numpy(np.asarray(host.node_features))[data.n_id])
    assert data.batch_size == 3 and "e_id" not in data
    with pytest.raises(ValueError, match="rows"):
        ws.to_pyg(blocks, format="data", x=x[:2])
    with pytest.raises(ValueError, match="format must be"):
        ws.to_pyg(blocks, format="dgl")
    with pytest.raises(ValueError, match="x goes with"):
        ws.to_pyg(blocks, x=x)


@pytest.mark.skipif(not (has_gpu() and torch.cuda.is_available()),
                    reason="needs a GPU, torch with CUDA and a CUDA build")
@pytest.mark.parametrize("location", ["device", "host"])
def test_loader_on_the_gpu(comm, host, edges, location):
    """The GPU sampler and gather: batches on the GPU, the CPU sampler's samples."""
    ws.set_device(0)
    graph = ws.make_graph(comm, host, "chunked", location)
    cpu_graph = ws.make_graph(comm, host, "continuous", "host")
    seeds = torch.tensor([3, 1, 399, 250])
    got = wpyg.WholestoreSampler(graph, [5, 3], random_seed=3, device="cuda").sample_from_nodes(
        NodeSamplerInput(None, seeds))
    want = wpyg.WholestoreSampler(cpu_graph, [5, 3], random_seed=3).sample_from_nodes(
        NodeSamplerInput(None, seeds))
    assert got.node.device.type == "cuda"
    for name in ("node", "row", "col", "edge"):
        assert torch.equal(getattr(got, name).cpu(), getattr(want, name)), name
    features = torch.from_numpy(np.asarray(host.node_features))
    labels = torch.arange(NODES) % 3
    data = wpyg.remote_backend(graph, device="cuda", y=labels)
    loader = NeighborLoader(data, num_neighbors=[5, 3], input_nodes=torch.arange(0, NODES, 7),
                            batch_size=16,
                            neighbor_sampler=wpyg.WholestoreSampler(graph, [5, 3], device="cuda"))
    for batch in loader:
        assert batch.x.device.type == "cuda" and batch.edge_index.device.type == "cuda"
        check_batch(batch.cpu(), features, labels, edges, [5, 3],
                    torch.arange(0, NODES, 7)[batch.input_id])


def test_graphsage_example_through_the_remote_backend():
    """examples/graphsage.py --loader pyg-remote: PyG's NeighborLoader over the store and PyG's
    SAGEConv learn the small labelled graph (the GPU when there is one)."""
    import os
    import re
    import subprocess
    import sys

    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "graphsage.py")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")}
    p = subprocess.run(
        [sys.executable, example, "--loader", "pyg-remote", "--nodes", "4000", "--classes", "4",
         "--avg-degree", "8", "--homophily", "0.9", "--feature-dim", "8", "--snr", "0.5",
         "--train-fraction", "0.5", "--val-fraction", "0.1", "--epochs", "2", "--batch-size",
         "128", "--hidden", "32", "--fanouts", "8,4", "--graph-seed", "2", "--embedding-dim", "4"],
        env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert p.returncode == 0, p.stdout
    summary = re.search(r"summary: (.*)", p.stdout)
    assert summary, p.stdout
    fields = dict(kv.split("=", 1) for kv in summary.group(1).split())
    assert fields["loader"] == "pyg-remote"
    assert float(fields["test_acc"]) >= 0.85, p.stdout  # 0.94 here; features alone: 0.55
