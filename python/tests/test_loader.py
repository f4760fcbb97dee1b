"""wholestore.loader: every seed once per epoch (the shares and padding of several ranks
included), the same batches for the same (seed, epoch) and others for another epoch, drop_last,
the same batches with and without prefetch, blocks equal to direct sample calls, and ranks with
uneven shares running the same number of batches on a graph in distributed memory."""

import pickle
import threading

import numpy as np
import pytest

import wholestore as ws
from conftest import has_gpu, run_ranks
from multirank_worker import loader_graph, loader_seeds


@pytest.fixture(scope="module")
def host():
    return ws.generate_sbm(3000, 5, avg_degree=6.0, feature_dim=8, seed=2)


@pytest.fixture(scope="module")
def graph(comm, host):
    return ws.make_graph(comm, host, "chunked", "host")


def seeds_of(host):
    """The training nodes: 1,800 or so, which no batch size below divides."""
    return np.flatnonzero(np.asarray(host.node_split) == 0)


def blocks_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.num_dst == y.num_dst
        for name in ("src_nodes", "offsets", "src_index"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)


def test_every_seed_once_per_epoch(graph, host):
    seeds = seeds_of(host)
    for make in (lambda: ws.NodeLoader(seeds, 100),
                 lambda: ws.NeighborLoader(graph, seeds, [4, 3], 100)):
        loader = make()
        assert len(loader) == -(-len(seeds) // 100)
        for epoch in range(2):
            batches = list(loader)
            assert len(batches) == len(loader)
            assert [len(b.seeds) for b in batches] == \
                [100] * (len(seeds) // 100) + [len(seeds) % 100]
            assert all(b.epoch == epoch and b.num_padded == 0 for b in batches)
            assert [b.index for b in batches] == list(range(len(loader)))
            got = np.concatenate([b.seeds for b in batches])
            assert got.dtype == np.int64
            np.testing.assert_array_equal(np.sort(got), np.sort(seeds))
        assert loader.epoch == 2


def test_the_shuffle_is_a_function_of_seed_and_epoch(graph, host):
    seeds = seeds_of(host)

    def order(loader, epoch):
        loader.set_epoch(epoch)
        return np.concatenate([b.seeds for b in loader])

    a = ws.NeighborLoader(graph, seeds, [4], 128, seed=3, features=False)
    b = ws.NeighborLoader(graph, seeds, [4], 128, seed=3, features=False)
    np.testing.assert_array_equal(order(a, 5), order(b, 5))
    np.testing.assert_array_equal(order(a, 0), order(b, 0))
    assert not np.array_equal(order(a, 0), order(a, 1))
    assert not np.array_equal(order(a, 0), order(ws.NodeLoader(seeds, 128, seed=4), 0))
    # The batches themselves, blocks included, repeat for the same (seed, epoch).
    a.set_epoch(2)
    b.set_epoch(2)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.seeds, y.seeds)
        assert x.random_seed == y.random_seed
        blocks_equal(x.blocks, y.blocks)
    # Without shuffle the seeds come in order, every epoch.
    plain = ws.NodeLoader(seeds, 128, shuffle=False)
    np.testing.assert_array_equal(order(plain, 0), seeds)
    np.testing.assert_array_equal(order(plain, 3), seeds)


def test_drop_last(host):
    seeds = seeds_of(host)
    loader = ws.NodeLoader(seeds, 100, drop_last=True)
    assert len(loader) == len(seeds) // 100
    batches = list(loader)
    assert [len(b.seeds) for b in batches] == [100] * len(loader)
    got = np.concatenate([b.seeds for b in batches])
    assert len(np.unique(got)) == len(got) and np.isin(got, seeds).all()
    # Another epoch leaves out other seeds.
    left_out = np.setdiff1d(seeds, got)
    assert len(left_out) == len(seeds) % 100
    again = np.concatenate([b.seeds for b in loader])
    assert not np.array_equal(np.setdiff1d(seeds, again), left_out)
    # Fewer seeds than one batch: no batch at all.
    assert len(ws.NodeLoader(seeds[:99], 100, drop_last=True)) == 0
    assert list(ws.NodeLoader(seeds[:99], 100, drop_last=True)) == []


def test_blocks_features_and_labels_are_those_of_direct_calls(graph, host):
    seeds = seeds_of(host)
    labels = np.asarray(host.node_labels)
    features = np.asarray(host.node_features)
    loader = ws.NeighborLoader(graph, seeds, [5, -1], 256, seed=11,
                               method="uniform_with_replacement", labels=labels)
    for epoch in range(2):
        for batch in loader:
            assert batch.random_seed == ws.loader.batch_random_seed(11, epoch, batch.index)
            want = graph.sample(batch.seeds, [5, -1], "uniform_with_replacement",
                                batch.random_seed)
            blocks_equal(batch.blocks, want)
            assert batch.blocks[0].num_dst == len(batch.seeds)
            np.testing.assert_array_equal(batch.blocks[0].src_nodes[:len(batch.seeds)],
                                          batch.seeds)
            np.testing.assert_array_equal(batch.input_nodes, want[-1].src_nodes)
            np.testing.assert_array_equal(batch.features, features[want[-1].src_nodes])
            np.testing.assert_array_equal(batch.labels, labels[batch.seeds])
            n_id, adjs = batch.to_pyg()
            np.testing.assert_array_equal(n_id, want[-1].src_nodes)
            assert len(adjs) == 2


def test_prefetch_gives_the_same_batches(graph, host):
    seeds = seeds_of(host)
    on = ws.NeighborLoader(graph, seeds, [4, 3], 64, seed=1)
    off = ws.NeighborLoader(graph, seeds, [4, 3], 64, seed=1, prefetch=False)
    assert on.prefetching and not off.prefetching
    workers = set()
    for epoch in range(2):
        count = 0
        for x, y in zip(on, off):
            workers.update(t.name for t in threading.enumerate())
            np.testing.assert_array_equal(x.seeds, y.seeds)
            blocks_equal(x.blocks, y.blocks)
            np.testing.assert_array_equal(x.features, y.features)
            count += 1
        assert count == len(on)
    assert "wholestore-loader" in workers  # the next batch was being made on the worker


def test_leaving_a_pass_early_then_the_next_epoch(graph, host):
    seeds = seeds_of(host)
    loader = ws.NeighborLoader(graph, seeds, [4], 64, seed=1, features=False)
    reference = ws.NeighborLoader(graph, seeds, [4], 64, seed=1, features=False, prefetch=False)
    for i, _ in enumerate(loader):
        if i == 2:
            break  # batch 3 was being made on the worker
    reference.set_epoch(1)
    for x, y in zip(loader, reference):
        assert x.epoch == 1
        blocks_equal(x.blocks, y.blocks)
    loader.close()  # no pass: nothing to wait for


def test_a_graph_in_distributed_memory_prefetches_only_when_told(comm, host):
    g = ws.make_graph(comm, host, "distributed", "host")
    seeds = seeds_of(host)
    assert not ws.NeighborLoader(g, seeds, [3], 64).prefetching
    always = ws.NeighborLoader(g, seeds, [3], 64, prefetch="always")
    assert always.prefetching
    plain = ws.NeighborLoader(g, seeds, [3], 64)
    for x, y in zip(always, plain):
        blocks_equal(x.blocks, y.blocks)
    g.free()


def test_bad_arguments(comm, graph, host):
    seeds = seeds_of(host)
    with pytest.raises(IndexError, match="seed 3000 at position 1 is outside") as e:
        ws.NeighborLoader(graph, [1, 3000], [2], 8)
    assert isinstance(e.value, ws.WholestoreError)
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        ws.NodeLoader(seeds, 0)
    with pytest.raises(ValueError, match="1-D"):
        ws.NodeLoader(np.zeros((2, 2), np.int64), 4)
    with pytest.raises(TypeError, match="integers"):
        ws.NodeLoader([0.5, 1.5], 4)
    with pytest.raises(TypeError, match="Graph"):
        ws.NeighborLoader(host, seeds, [2], 8)
    with pytest.raises(ValueError, match="prefetch"):
        ws.NeighborLoader(graph, seeds, [2], 8, prefetch="sometimes")
    with pytest.raises(ValueError, match="at least one hop"):
        ws.NeighborLoader(graph, seeds, [], 8)
    with pytest.raises(ValueError, match="seed must be at least 0"):
        ws.NodeLoader(seeds, 8, seed=-1)
    bare = ws.make_graph(comm, ws.generate_graph(100, 400, seed=1))
    with pytest.raises(ValueError, match="features=False"):
        ws.NeighborLoader(bare, [1, 2], [2], 8)
    assert len(list(ws.NeighborLoader(bare, [1, 2], [2], 8, features=False))) == 1
    # A bad method is the library's to name, at the first batch.
    with pytest.raises(ws.LogicError, match="unknown sample method 'bogus'"):
        next(iter(ws.NeighborLoader(graph, seeds, [2], 8, method="bogus")))


@pytest.mark.skipif(not has_gpu(), reason="needs a GPU and a CUDA build")
@pytest.mark.parametrize("prefetch", [True, False])
def test_the_gpu_sampler_gives_the_cpu_samplers_batches(comm, host, prefetch):
    """A device graph: the GPU sampler (on the worker thread with prefetch), CUDA tensors, the
    same batches bit for bit as the CPU sampler's on the graph in host memory."""
    torch = pytest.importorskip("torch")
    seeds = seeds_of(host)
    labels = np.asarray(host.node_labels)
    device = ws.make_graph(comm, host, "continuous", "device")
    on_host = ws.make_graph(comm, host, "continuous", "host")
    gpu = ws.NeighborLoader(device, seeds, [4, 3], 128, seed=2, prefetch=prefetch,
                            labels=torch.from_numpy(labels).cuda())
    cpu = ws.NeighborLoader(on_host, seeds, [4, 3], 128, seed=2, labels=labels)
    assert gpu.prefetching == prefetch
    count = 0
    for x, y in zip(gpu, cpu):
        assert x.seeds.is_cuda and x.features.is_cuda and x.labels.is_cuda
        np.testing.assert_array_equal(x.seeds.cpu().numpy(), y.seeds)
        for a, b in zip(x.blocks, y.blocks):
            assert a.num_dst == b.num_dst
            for name in ("src_nodes", "offsets", "src_index"):
                np.testing.assert_array_equal(getattr(a, name).cpu().numpy(), getattr(b, name))
        np.testing.assert_array_equal(x.features.cpu().numpy(), y.features)
        np.testing.assert_array_equal(x.labels.cpu().numpy(), y.labels)
        count += 1
    assert count == len(cpu)
    device.free()


@pytest.mark.parametrize("ranks", [2, 3])
def test_ranks_with_uneven_shares_run_the_same_batches(comm, tmp_path, ranks):
    outputs = run_ranks(ranks, "loader", tmp_path)
    for out in outputs:
        assert "MismatchError: NodeLoader: every rank must pass the same batch_size: rank 0 " \
               "has 16, rank 1 17" in out, out
    runs = []
    for rank in range(ranks):
        with open(tmp_path / f"loader{rank}.pkl", "rb") as f:
            runs.append(pickle.load(f))
    seeds = loader_seeds()
    n = len(seeds)
    g = ws.make_graph(comm, loader_graph(), "continuous", "host")
    features = np.asarray(loader_graph().node_features)
    for drop_last in (False, True):
        per_rank = [r[drop_last] for r in runs]
        share = n // ranks if drop_last else -(-n // ranks)
        count = share // 16 if drop_last else -(-share // 16)
        assert [r["len"] for r in per_rank] == [count] * ranks
        for epoch in range(2):
            batches = [r["epochs"][epoch] for r in per_rank]
            # Every rank ran the same number of batches with the same seed counts.
            assert [len(b) for b in batches] == [count] * ranks
            sizes = [[len(x["seeds"]) for x in b] for b in batches]
            assert all(s == sizes[0] for s in sizes)
            everything = np.concatenate([x["seeds"] for b in batches for x in b])
            padded = sum(x["num_padded"] for b in batches for x in b)
            if drop_last:
                assert padded == 0 and len(everything) == ranks * count * 16
                assert len(np.unique(everything)) == len(everything)
            else:
                # Every seed once, and the padding (the last seeds) repeats seeds of the epoch.
                assert padded == ranks * share - n
                real = np.concatenate([x["seeds"][:len(x["seeds"]) - x["num_padded"]]
                                       for b in batches for x in b])
                np.testing.assert_array_equal(np.sort(real), seeds)
            for b in batches:
                mine = np.concatenate([x["seeds"] for x in b])
                assert len(np.unique(mine)) == len(mine)  # a share never holds a seed twice
            # The same random seed for batch i on every rank, and for each batch the blocks
            # and features of one rank's sample of the same seeds on the graph in continuous
            # memory.
            for i in range(count):
                assert len({b[i]["random_seed"] for b in batches}) == 1
            for b in batches:
                for x in b:
                    want = g.sample(x["seeds"], [3, 2], random_seed=x["random_seed"])
                    assert len(want) == len(x["blocks"])
                    for w, (num_dst, src_nodes, offsets, src_index) in zip(want, x["blocks"]):
                        assert w.num_dst == num_dst
                        np.testing.assert_array_equal(w.src_nodes, src_nodes)
                        np.testing.assert_array_equal(w.offsets, offsets)
                        np.testing.assert_array_equal(w.src_index, src_index)
                    np.testing.assert_array_equal(x["features"], features[want[-1].src_nodes])
                    np.testing.assert_array_equal(x["labels"], x["seeds"] * 10)
        # Another epoch, other batches.
        assert not np.array_equal(per_rank[0]["epochs"][0][0]["seeds"],
                                  per_rank[0]["epochs"][1][0]["seeds"])
