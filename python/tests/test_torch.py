"""torch integration: wholestore.nn.Embedding against a pure-torch reference (nn.Embedding with
torch's own optimizer) on small tables, on the CPU (host tables) and on the GPU (device and
host tables, CUDA tensors); its state_dict (bit-equal round trips, files, one and two ranks)
and SparseOptimizer (deferred updates, LR schedulers).  Skipped without torch; the GPU part
without a GPU."""

import os
import subprocess
import sys

import numpy as np
import pytest

import wholestore as ws
from conftest import free_port

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


# ---- state_dict and SparseOptimizer ----


def trained_module(comm, optimizer_name="adam", dtype="float32", type="continuous", seed=2,
                   steps=3):
    """A module whose table has had ``steps`` updates through a SparseOptimizer."""
    table = ws.EmbeddingTable(comm, 30, 8, dtype, type, "host", optimizer=optimizer_name,
                              init_range=(-1, 1), seed=seed)
    module = wholestore.nn.Embedding(table)
    opt = wholestore.nn.SparseOptimizer(module, lr=0.05)
    for indices, coef in batches_on("cpu", table.rows, table.dim)[:steps]:
        opt.zero_grad()
        (module(indices) * coef).sum().backward()
        opt.step()
    return module


def table_contents(table):
    """Weights (as raw bytes: bit-equality), every state array and the step."""
    rows = torch.arange(table.rows, device="cuda" if table.location == "device" else "cpu")
    weights = table.lookup(rows).cpu()  # torch: numpy has no bfloat16
    out = {"weight": weights.view(torch.uint8).numpy(), "step": table.step}
    for name in table.state_names:
        out[name] = table.read_state(name, rows).cpu().numpy()
    return out


def assert_same_contents(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("optimizer_name,dtype", [("sgd", "float32"), ("adam", "float32"),
                                                  ("rowwise_adagrad", "float16"),
                                                  ("rmsprop", "bfloat16")])
def test_state_dict_round_trip_is_bit_equal(comm, optimizer_name, dtype):
    source = trained_module(comm, optimizer_name, dtype)
    state = source.state_dict()
    table = source.table
    expected_keys = ["weight", "optimizer_step", "checkpoint_manifest"] + [
        "optimizer_state." + n for n in table.state_names]
    assert sorted(state) == sorted(expected_keys)
    assert state["weight"].dtype == getattr(torch, dtype)
    assert torch.equal(state["weight"], table.lookup(torch.arange(30)))
    assert int(state["optimizer_step"]) == table.step == 3
    for name in table.state_names:
        np.testing.assert_array_equal(state["optimizer_state." + name].numpy(),
                                      table.read_state(name, np.arange(30)))
    # A fresh table of the same shape, other weights, other memory type.
    fresh_table = ws.EmbeddingTable(comm, 30, 8, dtype, "chunked", "host",
                                    optimizer=optimizer_name, init_range=(-1, 1), seed=9)
    fresh = wholestore.nn.Embedding(fresh_table)
    assert fresh.load_state_dict(state) is not None
    assert_same_contents(table_contents(fresh_table), table_contents(table))
    # Training on continues bit for bit, as if it had not stopped.
    for module in (source, fresh):
        opt = wholestore.nn.SparseOptimizer(module, lr=0.05)
        indices, coef = batches_on("cpu", 30, 8)[2]
        (module(indices) * coef).sum().backward()
        opt.step()
    assert_same_contents(table_contents(fresh_table), table_contents(table))


def test_state_dict_through_a_file(comm, tmp_path):
    """torch.save / torch.load of a model holding a store embedding beside dense layers."""

    class Model(torch.nn.Module):
        def __init__(self, table):
            super().__init__()
            self.emb = wholestore.nn.Embedding(table)
            self.linear = torch.nn.Linear(8, 2)

    source = Model(trained_module(comm, "adagrad").table)
    path = tmp_path / "model.pt"
    torch.save(source.state_dict(), path)
    target = Model(ws.EmbeddingTable(comm, 30, 8, optimizer="adagrad", seed=11))
    result = target.load_state_dict(torch.load(path))
    assert not result.missing_keys and not result.unexpected_keys
    assert_same_contents(table_contents(target.emb.table), table_contents(source.emb.table))
    assert torch.equal(target.linear.weight, source.linear.weight)
    assert not any(name.startswith("emb.") for name, _ in target.named_parameters())


def test_load_state_dict_refuses_what_is_not_the_table(comm):
    state = trained_module(comm, "adam").state_dict()
    other = ws.EmbeddingTable(comm, 30, 8, optimizer="sgd", seed=3)
    before = table_contents(other)
    with pytest.raises(RuntimeError, match="optimizer is adam, the table's sgd"):
        wholestore.nn.Embedding(other).load_state_dict(state)
    small = ws.EmbeddingTable(comm, 29, 8, optimizer="adam", seed=3)
    with pytest.raises(RuntimeError, match=r"size mismatch for weight.*shape \(29, 8\)"):
        wholestore.nn.Embedding(small).load_state_dict(state)
    edited = dict(state, weight=state["weight"].clone())
    edited["weight"][4, 1] += 1
    same_shape = ws.EmbeddingTable(comm, 30, 8, optimizer="adam", seed=3)
    same_before = table_contents(same_shape)
    with pytest.raises(RuntimeError, match="checksum"):
        wholestore.nn.Embedding(same_shape).load_state_dict(edited)
    partial = {k: v for k, v in state.items() if k != "optimizer_state.v"}
    with pytest.raises(RuntimeError, match="missing optimizer_state.v"):
        wholestore.nn.Embedding(same_shape).load_state_dict(partial)
    # Nothing of the table's: missing keys (an error when strict), the table as it was.
    module = wholestore.nn.Embedding(same_shape)
    with pytest.raises(RuntimeError, match='Missing key.*"weight"'):
        module.load_state_dict({})
    assert "weight" in module.load_state_dict({}, strict=False).missing_keys
    assert_same_contents(table_contents(other), before)
    assert_same_contents(table_contents(same_shape), same_before)


def test_step_lr_halves_the_lr_of_the_next_step(comm):
    """SparseOptimizer: backward records, step applies with the group's lr, and StepLR changes
    that lr: each step's weight change is the SGD step with the scheduled lr."""
    table = ws.EmbeddingTable(comm, 20, 4, optimizer="sgd", init_range=(-1, 1), seed=1)
    module = wholestore.nn.Embedding(table, lr=123.0)  # the optimizer's lr wins
    opt = wholestore.nn.SparseOptimizer(module, lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    indices = torch.tensor([[3, 0], [19, 7]])
    coef = torch.randn(2, 2, 4, generator=torch.Generator().manual_seed(4))
    grads = coef.reshape(4, 4)
    rows = indices.reshape(-1)
    for lr in (0.1, 0.05, 0.025):
        assert module.lr == opt.param_groups[0]["lr"] == pytest.approx(lr)
        before = torch.from_numpy(table.lookup(rows.numpy()))
        opt.zero_grad()
        (module(indices) * coef).sum().backward()
        assert torch.equal(torch.from_numpy(table.lookup(rows.numpy())), before)  # recorded
        opt.step()
        after = torch.from_numpy(table.lookup(rows.numpy()))
        assert torch.equal(after, before - torch.tensor(lr, dtype=torch.float32) * grads)
        scheduler.step()
    assert table.step == 3
    # The scheduler's state and the groups' lr travel in the optimizer's state_dict.
    saved = opt.state_dict()
    assert saved["param_groups"][0]["lr"] == pytest.approx(0.0125)
    again = wholestore.nn.SparseOptimizer(
        wholestore.nn.Embedding(ws.EmbeddingTable(comm, 20, 4)), lr=1.0)
    again.load_state_dict(saved)
    assert again.param_groups[0]["lr"] == pytest.approx(0.0125)


def test_sparse_optimizer_accumulates_and_zero_grad_drops(comm):
    table = ws.EmbeddingTable(comm, 10, 3, optimizer="sgd", init_range=(-1, 1), seed=2)
    reference = ws.EmbeddingTable(comm, 10, 3, optimizer="sgd", init_range=(-1, 1), seed=2)
    module = wholestore.nn.Embedding(table)
    opt = wholestore.nn.SparseOptimizer([module], lr=0.5)
    # Two backward passes, one step: one update with the summed gradients.
    module(torch.tensor([1, 2])).sum().backward()
    (module(torch.tensor([2, 9], dtype=torch.int32)) * 3).sum().backward()
    opt.step()
    reference.apply_gradients(np.array([1, 2, 2, 9]),
                              np.repeat([[1.0], [1.0], [3.0], [3.0]], 3, 1).astype(np.float32), 0.5)
    assert_same_contents(table_contents(table), table_contents(reference))
    # zero_grad drops what was recorded; the step still runs (collective), with no rows.
    module(torch.tensor([4])).sum().backward()
    opt.zero_grad()
    opt.step()
    assert table.step == 2
    reference.step = 2
    assert_same_contents(table_contents(table), table_contents(reference))


def test_sparse_optimizer_groups_and_misuse(comm):
    def module(seed):
        return wholestore.nn.Embedding(ws.EmbeddingTable(comm, 6, 2, init_range=(-1, 1),
                                                         seed=seed))

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = module(1), module(2)
            self.linear = torch.nn.Linear(2, 1)

    model = Model()
    opt = wholestore.nn.SparseOptimizer(model, lr=0.1)  # every Embedding of the model
    assert [len(g["params"]) for g in opt.param_groups] == [2]
    assert model.a.optimizer is opt and model.a.lr == 0.1
    model.a.lr = 0.3  # sets the group's
    assert opt.param_groups[0]["lr"] == 0.3
    other = Model()
    grouped = wholestore.nn.SparseOptimizer([{"params": other.a, "lr": 0.2},
                                             {"params": [other.b]}], lr=0.4)
    assert [g["lr"] for g in grouped.param_groups] == [0.2, 0.4]
    with pytest.raises(ValueError, match="already held by another SparseOptimizer"):
        wholestore.nn.SparseOptimizer(model.a)
    with pytest.raises(TypeError, match="wrap a table in wholestore.nn.Embedding"):
        wholestore.nn.SparseOptimizer(model.a.table)
    with pytest.raises(ValueError, match="holds no wholestore.nn.Embedding"):
        wholestore.nn.SparseOptimizer(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="lr must be positive"):
        wholestore.nn.SparseOptimizer(module(3), lr=0.0)
    # Without its optimizer a module applies each backward at once again, with its own lr.
    alone = module(4)
    held = wholestore.nn.SparseOptimizer(alone, lr=0.1)
    del held
    assert alone.optimizer is None
    alone(torch.tensor([0])).sum().backward()
    assert alone.table.step == 1


WORKER = r'''
import os, sys
import numpy as np, torch
import wholestore as ws, wholestore.nn

mode, out = sys.argv[1], sys.argv[2]
comm = ws.init(device=None)
rank = comm.rank
table = ws.EmbeddingTable(comm, 41, 6, "float32", "distributed", "host", optimizer="adam",
                          init_range=(-1, 1), seed=4)
module = wholestore.nn.Embedding(table)
everything = np.arange(41)
if mode == "save":
    opt = wholestore.nn.SparseOptimizer(module, lr=0.05)
    for step in range(3):
        opt.zero_grad()
        indices = torch.tensor([rank, 40 - rank, 7 + step])
        (module(indices) * (rank + 1.0)).sum().backward()
        opt.step()
    state = module.state_dict()  # every rank: the whole table
    assert np.array_equal(state["weight"].numpy(), table.lookup(everything))
    assert np.array_equal(state["optimizer_state.v"].numpy(), table.read_state("v", everything))
    if rank == 0:
        torch.save(state, os.path.join(out, "two.pt"))
    module.state_dict_rank0_only = True
    assert (len(module.state_dict()) > 0) == (rank == 0)
else:
    # Rank 0 loads the file; the others pass nothing and receive the table all the same.
    state = torch.load(os.path.join(out, "one.pt")) if rank == 0 else {}
    module.load_state_dict(state, strict=rank == 0)
np.save(os.path.join(out, f"{mode}_weights{rank}.npy"), table.lookup(everything))
np.save(os.path.join(out, f"{mode}_m{rank}.npy"), table.read_state("m", everything))
with open(os.path.join(out, f"{mode}_step{rank}.txt"), "w") as f:
    f.write(str(table.step))
print("rank ok")
'''


def run_two_ranks(tmp_path, mode):
    port = free_port()
    script = tmp_path / "state_worker.py"
    script.write_text(WORKER)
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   WHOLESTORE_TIMEOUT="60")
        procs.append(subprocess.Popen([sys.executable, str(script), mode, str(tmp_path)],
                                      env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for rank, p in enumerate(procs):
        try:
            output, _ = p.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"rank {rank} ({mode}) did not finish")
        assert p.returncode == 0, output


def test_state_dict_across_rank_counts(comm, tmp_path):
    """Two ranks of a distributed table give every rank the whole table in its state dict; a
    one-rank table loads their file, and two ranks load a one-rank file (rank 0's dict)."""
    run_two_ranks(tmp_path, "save")
    saved = [np.load(tmp_path / f"save_weights{r}.npy") for r in range(2)]
    np.testing.assert_array_equal(saved[0], saved[1])
    one = ws.EmbeddingTable(comm, 41, 6, "float32", "continuous", "host", optimizer="adam",
                            seed=8)
    module = wholestore.nn.Embedding(one)
    module.load_state_dict(torch.load(tmp_path / "two.pt"))
    np.testing.assert_array_equal(one.lookup(np.arange(41)), saved[0])
    np.testing.assert_array_equal(one.read_state("m", np.arange(41)),
                                  np.load(tmp_path / "save_m0.npy"))
    assert one.step == 3
    # One more step here, then the other way round.
    opt = wholestore.nn.SparseOptimizer(module, lr=0.05)
    module(torch.tensor([0, 40])).sum().backward()
    opt.step()
    torch.save(module.state_dict(), tmp_path / "one.pt")
    run_two_ranks(tmp_path, "load")
    for rank in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"load_weights{rank}.npy"),
                                      one.lookup(np.arange(41)))
        np.testing.assert_array_equal(np.load(tmp_path / f"load_m{rank}.npy"),
                                      one.read_state("m", np.arange(41)))
        assert (tmp_path / f"load_step{rank}.txt").read_text() == "4"


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


@gpu
@pytest.mark.parametrize("location", ["device", "host"])
def test_sparse_optimizer_and_state_dict_on_the_gpu(comm, location):
    """CUDA tensors through a SparseOptimizer give the CPU path's bits; the state dict of a
    GPU-trained table round-trips into a fresh device table."""
    ws.set_device(0)
    make = lambda loc, seed=2: ws.EmbeddingTable(comm, 30, 8, "float32", "chunked", loc,  # noqa
                                                 optimizer="adam", init_range=(-1, 1), seed=seed)
    tables = {"cuda": make(location), "cpu": make("host")}
    for device, table in tables.items():
        module = wholestore.nn.Embedding(table)
        opt = wholestore.nn.SparseOptimizer(module, lr=0.05)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        for indices, coef in batches_on(device, table.rows, table.dim):
            opt.zero_grad()
            (module(indices) * coef).sum().backward()
            opt.step()
            scheduler.step()
    torch.cuda.synchronize()
    assert_same_contents(table_contents(tables["cuda"]), table_contents(tables["cpu"]))
    state = wholestore.nn.Embedding(tables["cuda"]).state_dict()
    fresh = make("device", seed=7)
    wholestore.nn.Embedding(fresh).load_state_dict(state)
    assert_same_contents(table_contents(fresh), table_contents(tables["cpu"]))
