"""torch integration: wholestore.nn.Embedding against a pure-torch reference (nn.Embedding with
torch's own optimizer) on small tables, on the CPU (host tables) and on the GPU (device and
host tables, CUDA tensors).  Skipped without torch; the GPU part without a GPU."""

import numpy as np
import pytest

import wholestore as ws

torch = pytest.importorskip("torch")
import wholestore.nn  # noqa: E402

GPU = torch.cuda.is_available() and ws.cuda_built() and ws.device_count() > 0


def reference_run(table, optimizer_name, lr, batches, device):
    """The same training with torch.nn.Embedding (dense) and torch's optimizer."""
    weight = table.lookup(torch.arange(table.rows, device=device)).clone()
    ref = torch.nn.Embedding(table.rows, table.dim, _weight=weight.clone())
    ref = ref.to(device)
    opt = (torch.optim.SGD(ref.parameters(), lr=lr) if optimizer_name == "sgd"
           else torch.optim.Adagrad(ref.parameters(), lr=lr, eps=1e-8))
    for indices, coef in batches:
        opt.zero_grad()
        (ref(indices) * coef).sum().backward()
        opt.step()
    return ref.weight.detach()


def batches_on(device, rows, dim):
    g = torch.Generator().manual_seed(0)
    out = []
    for _ in range(3):
        indices = torch.randint(0, rows, (4, 5), generator=g)
        indices[0, :2] = torch.tensor([0, rows - 1])
        indices[1, 0] = indices[2, 0]  # a duplicate
        coef = torch.randn(4, 5, dim, generator=g)
        out.append((indices.to(device), coef.to(device)))
    return out


def train(module, batches):
    for indices, coef in batches:
        out = module(indices)
        assert out.shape == indices.shape + (module.embedding_dim,)
        assert out.requires_grad
        (out * coef).sum().backward()


def check_against_torch(comm, optimizer_name, device, location, type="continuous"):
    table = ws.EmbeddingTable(comm, 30, 8, "float32", type, location, optimizer=optimizer_name,
                              init_range=(-1, 1), seed=2, eps=1e-8)
    batches = batches_on(device, table.rows, table.dim)
    expected = reference_run(table, optimizer_name, 0.1, batches, device)
    module = wholestore.nn.Embedding(table, lr=0.1)
    assert list(module.parameters()) == []  # torch optimizers never see the table
    train(module, batches)
    assert table.step == len(batches)
    got = module(torch.arange(table.rows, device=device)).detach()
    assert got.device.type == torch.device(device).type
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer_name", ["sgd", "adagrad"])
def test_autograd_embedding_cpu(comm, optimizer_name):
    check_against_torch(comm, optimizer_name, "cpu", "host")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_under_torch_compile(comm, device):
    """torch.compile around a model with a store embedding: dynamo breaks the graph at the
    lookup (a call into C++) and compiles the rest; forward and the sparse update equal eager."""
    if device == "cuda" and not GPU:
        pytest.skip("needs a GPU")
    if not hasattr(torch, "compile"):
        pytest.skip("torch without torch.compile")
    location = "host" if device == "cpu" else "device"
    make = lambda: ws.EmbeddingTable(comm, 40, 8, "float32", "continuous", location,  # noqa
                                     optimizer="adagrad", init_range=(-1, 1), seed=6)
    linear = torch.nn.Linear(8, 3).to(device)

    class Model(torch.nn.Module):
        def __init__(self, table):
            super().__init__()
            self.emb = wholestore.nn.Embedding(table, lr=0.1)
            self.linear = linear

        def forward(self, idx):
            return torch.tanh(self.linear(self.emb(idx) * 2.0)).sum()

    eager_table, compiled_table = make(), make()
    eager, compiled = Model(eager_table), torch.compile(Model(compiled_table), backend="aot_eager")
    for step in range(3):
        idx = torch.tensor([[1, 5, 5], [39, 0, step]], device=device)
        want, got = eager(idx), compiled(idx)
        torch.testing.assert_close(got, want)
        want.backward()
        got.backward()
    everything = torch.arange(40, device=device)
    assert torch.equal(compiled_table.lookup(everything), eager_table.lookup(everything))
    assert compiled_table.step == eager_table.step == 3


def test_forward_without_grad_and_dtype(comm):
    table = ws.EmbeddingTable(comm, 10, 4, "float16", init_range=(-1, 1))
    module = wholestore.nn.Embedding(table, lr=0.1, dtype=torch.float32)
    with torch.no_grad():
        out = module(torch.tensor([[1, 2], [3, 9]]))
    assert out.dtype == torch.float32 and not out.requires_grad
    np.testing.assert_array_equal(out.reshape(4, 4).numpy(),
                                  table.lookup([1, 2, 3, 9], dtype="float32"))
    assert table.step == 0


def test_torch_cpu_arrays_cross_by_dlpack(comm):
    m = ws.WholeMemory(comm, (6, 2), "float32", "chunked", "host")
    view = torch.from_dlpack(m.local_view())
    view.copy_(torch.arange(12, dtype=torch.float32).reshape(6, 2))
    out = m.gather(torch.tensor([5, 0]))
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, torch.tensor([[10.0, 11.0], [0.0, 1.0]]))
    m.scatter(torch.ones(1, 2), torch.tensor([3], dtype=torch.int32))
    torch.testing.assert_close(view[3], torch.ones(2))


# ---- GPU ----

gpu = pytest.mark.skipif(not GPU, reason="needs a GPU, torch with CUDA and a CUDA build")


@gpu
@pytest.mark.parametrize("optimizer_name", ["sgd", "adagrad"])
@pytest.mark.parametrize("location", ["device", "host"])
def test_autograd_embedding_gpu(comm, optimizer_name, location):
    ws.set_device(0)
    check_against_torch(comm, optimizer_name, "cuda", location)


@gpu
@pytest.mark.parametrize("type", ["continuous", "chunked"])
@pytest.mark.parametrize("location", ["device", "host"])
def test_gpu_gather_scatter_and_views(comm, type, location):
    ws.set_device(0)
    m = ws.WholeMemory(comm, (50, 3), "float32", type, location)
    ref = torch.randn(50, 3, device="cuda")
    local = torch.from_dlpack(m.local_view())
    assert local.device.type == ("cuda" if location == "device" else "cpu")
    local.copy_(ref if location == "device" else ref.cpu())
    torch.cuda.synchronize()
    idx = torch.randint(0, 50, (70,), device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # the current stream is the call's default
        out = m.gather(idx)
    stream.synchronize()
    assert out.device.type == "cuda"
    torch.testing.assert_close(out, ref[idx])
    half = m.gather(idx, out=torch.empty(70, 3, dtype=torch.bfloat16, device="cuda"))
    torch.testing.assert_close(half, ref[idx].to(torch.bfloat16))
    m.scatter(torch.zeros(2, 3, device="cuda"), torch.tensor([0, 49], device="cuda"))
    torch.cuda.synchronize()
    ref[[0, 49]] = 0
    torch.testing.assert_close(m.gather(torch.arange(50, device="cuda")), ref)
    with pytest.raises(ws.LogicError, match="index 50 at position 0"):
        m.gather(torch.tensor([50], device="cuda"))


@gpu
def test_cupy_gather():
    cupy = pytest.importorskip("cupy")
    ws.set_device(0)
    comm = ws.init(device=0)
    m = ws.WholeMemory(comm, (20, 4), "float32", "continuous", "device")
    m.scatter(cupy.arange(80, dtype=cupy.float32).reshape(20, 4), cupy.arange(20))
    out = m.gather(cupy.asarray([19, 0], dtype=cupy.int64))
    assert isinstance(out, cupy.ndarray)
    cupy.testing.assert_array_equal(out, cupy.asarray([[76, 77, 78, 79], [0, 1, 2, 3]],
                                                      dtype=cupy.float32))


@gpu
@pytest.mark.parametrize("location", ["device", "host"])
def test_gpu_sampler_matches_cpu_sampler(comm, location):
    ws.set_device(0)
    host = ws.generate_graph(500, 5000, seed=3, feature_dim=4)
    cpu_graph = ws.make_graph(comm, host, "continuous", "host")
    graph = ws.make_graph(comm, host, "chunked", location)
    seeds = torch.tensor([3, 1, 499, 3, 250], device="cuda")
    expected = cpu_graph.sample(seeds.cpu().numpy(), [5, 3], random_seed=7, edge_ids=True)
    sampler = ws.GpuSampler(graph)
    got = sampler.sample(seeds, [5, 3], random_seed=7, edge_ids=True)
    for a, b in zip(expected, got):
        assert a.num_dst == b.num_dst
        for name in ("src_nodes", "offsets", "src_index", "edge_ids"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name).cpu().numpy())
    assert got[0].edge_index().device.type == "cuda"
    features = graph.gather_features(got[-1].src_nodes)
    torch.testing.assert_close(features.cpu(),
                               torch.from_numpy(host.node_features[expected[-1].src_nodes]))


@gpu
@pytest.mark.parametrize("location", ["device", "host"])
def test_gpu_walks_and_negatives_match_cpu(comm, location):
    """The GPU walker and a device alias table give the CPU path's walks and draws bit for bit,
    into torch tensors on the GPU; the PyG view of a GPU sample stays on the GPU."""
    ws.set_device(0)
    host = ws.generate_graph(500, 5000, seed=4, symmetrize=True)
    cpu_graph = ws.make_graph(comm, host, "continuous", "host")
    graph = ws.make_graph(comm, host, "chunked", location)
    starts = torch.arange(0, 500, 3, device="cuda")
    for p, q in [(1.0, 1.0), (0.5, 2.0)]:
        expected = cpu_graph.random_walks(starts.cpu().numpy(), length=10, p=p, q=q, seed=9)
        got = graph.random_walks(starts, length=10, p=p, q=q, seed=9)
        assert got.device.type == "cuda"
        np.testing.assert_array_equal(got.cpu().numpy(), expected)
    cpu_neg = ws.NegativeSampler(comm, cpu_graph)
    gpu_neg = ws.NegativeSampler(comm, graph, location="device")
    out = torch.empty(10000, dtype=torch.int64, device="cuda")
    gpu_neg.sample(seed=2, first_draw=7, out=out)
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), cpu_neg.sample(10000, seed=2, first_draw=7))
    blocks = ws.GpuSampler(graph).sample(starts, [4, 2], random_seed=1)
    n_id, adjs = ws.to_pyg(blocks)
    assert n_id.device.type == "cuda" and adjs[0][0].device.type == "cuda"


class CudaInterfaceOnly:
    """A CUDA tensor seen only through __cuda_array_interface__ (as Numba's device arrays)."""

    def __init__(self, tensor):
        self.tensor = tensor
        self.__cuda_array_interface__ = tensor.__cuda_array_interface__


@gpu
def test_cuda_array_interface_on_the_gpu(comm):
    ws.set_device(0)
    table = ws.EmbeddingTable(comm, 100, 8, "float32", "continuous", "device", optimizer="sgd",
                              init_range=(-1.0, 1.0), seed=5)
    idx = torch.tensor([3, 99, 0], device="cuda")
    expected = table.lookup(idx)
    out = torch.zeros(3, 8, device="cuda")
    got = table.lookup(CudaInterfaceOnly(idx), out=CudaInterfaceOnly(out))
    torch.cuda.synchronize()
    assert isinstance(got, CudaInterfaceOnly)
    torch.testing.assert_close(out, expected)
