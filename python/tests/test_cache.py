"""The device cache from Python: hottest_rows against a counting reference (CPU), argument
errors (CPU), and on the GPU: lookups through the cache equal the table's bit for bit, hits
counted as an independent count of cached indices says, training through the cache (and
through ws.nn.Embedding over it) equal to training an uncached twin, write-through and flush."""

import collections

import numpy as np
import pytest

import wholestore as ws
from conftest import has_gpu


def reference_hottest(sample, capacity):
    counts = collections.Counter(int(x) for x in sample)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return np.array([row for row, _ in ranked[:capacity]], dtype=np.int64)


def power_law_sample(rows, n, seed):
    """Power-law draws; the hot rows are the same for every seed (a fixed permutation), as in
    a training stream whose sample chose the cache."""
    ranks = np.minimum(np.random.default_rng(seed).zipf(1.3, n) - 1, rows - 1)
    return np.random.default_rng(12345).permutation(rows)[ranks].astype(np.int64)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hottest_rows_against_a_count(seed):
    sample = power_law_sample(500, 3000, seed)
    for capacity in (1, 7, 50, 499, 10_000):
        got = ws.hottest_rows(sample, 500, capacity)
        np.testing.assert_array_equal(got, reference_hottest(sample, capacity))
    # int32 samples, ties between equally frequent rows go to the lower row
    tie = np.array([9, 4, 9, 4, 2], dtype=np.int32)
    np.testing.assert_array_equal(ws.hottest_rows(tie, 10, 2), [4, 9])
    assert len(ws.hottest_rows(np.array([], dtype=np.int64), 10, 3)) == 0


def test_hottest_rows_refuses_an_index_outside_the_table():
    with pytest.raises(ws.LogicError, match="12"):
        ws.hottest_rows(np.array([1, 2, 12, 3]), 10, 2)
    with pytest.raises(ws.LogicError, match="-1"):
        ws.hottest_rows(np.array([-1]), 10, 2)


def test_cache_arguments(comm):
    table = ws.EmbeddingTable(comm, 20, 4)
    with pytest.raises(ValueError, match="either rows or fraction"):
        ws.DeviceCache(table)
    with pytest.raises(ValueError, match="either rows or fraction"):
        ws.DeviceCache(table, [1, 2], fraction=0.5, sample=[1])
    with pytest.raises(ValueError, match="needs a sample"):
        ws.DeviceCache(table, fraction=0.5)
    with pytest.raises(ValueError, match="not in"):
        ws.DeviceCache(table, fraction=1.5, sample=[1])


@pytest.mark.skipif(has_gpu(), reason="checks the error without a GPU")
def test_cache_without_a_gpu_is_a_clear_error(comm):
    table = ws.EmbeddingTable(comm, 20, 4)
    with pytest.raises((ws.LogicError, ws.CudaError)) as info:
        ws.DeviceCache(table, [1, 2, 3], device=0)
    assert "cache" in str(info.value).lower() or "cuda" in str(info.value).lower()


try:
    import torch
except ImportError:
    torch = None
needs_gpu = pytest.mark.skipif(not has_gpu() or torch is None, reason="needs a GPU and torch")


def gpu_batches(rows, n, dim, seed, count=4):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        idx = torch.from_numpy(power_law_sample(rows, n, int(torch.randint(0, 1 << 30, (1,),
                                                                             generator=g))))
        idx[:3] = torch.tensor([0, rows - 1, idx[5]])  # both ends and a duplicate
        out.append((idx.cuda(), torch.randn(n, dim, generator=g).cuda()))
    return out


@needs_gpu
@pytest.mark.parametrize("type", ["continuous", "chunked"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cache_equals_the_table_and_counts_hits(comm, type, dtype):
    rows, dim = 3000, 24
    table = ws.EmbeddingTable(comm, rows, dim, dtype, type, "host", init_range=(-1, 1), seed=5)
    sample = power_law_sample(rows, 20_000, 9)
    cache = ws.DeviceCache(table, fraction=0.1, sample=sample)
    assert cache.capacity == 300
    cached = set(ws.hottest_rows(sample, rows, 300).tolist())
    expected_hits = 0
    expected_lookups = 0
    for idx, _ in gpu_batches(rows, 4096, dim, 1):
        got = cache.lookup(idx, dtype="float32")
        want = table.lookup(idx, dtype="float32")
        assert torch.equal(got, want)
        host = idx.cpu().numpy()
        expected_hits += int(np.isin(host, list(cached)).sum())
        expected_lookups += len(host)
    assert cache.stats() == (expected_lookups, expected_hits)
    assert expected_hits > expected_lookups // 2  # the skewed stream mostly hits
    cache.reset_stats()
    assert cache.stats() == (0, 0)
    with pytest.raises(ws.LogicError, match=str(rows)):
        cache.lookup(torch.tensor([1, rows], device="cuda"))


@needs_gpu
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_training_through_the_cache_equals_the_uncached_twin(comm, optimizer):
    rows, dim = 2000, 16
    make = lambda: ws.EmbeddingTable(comm, rows, dim, "float32", "continuous", "host",  # noqa
                                     optimizer=optimizer, init_range=(-1, 1), seed=3)
    table, twin = make(), make()
    cache = ws.DeviceCache(table, fraction=0.2, sample=power_law_sample(rows, 10_000, 4))
    for idx, grad in gpu_batches(rows, 1500, dim, 2):
        cache.apply_gradients(idx, grad, 0.05)
        twin.apply_gradients(idx, grad, 0.05)
        probe = idx.flip(0)
        assert torch.equal(cache.lookup(probe), twin.lookup(probe))
    everything = torch.arange(rows, device="cuda")
    assert torch.equal(table.lookup(everything), twin.lookup(everything))
    # write-through raw rows; a write behind the cache's back needs a flush
    rows_to_write = torch.tensor([0, 1, 2, rows - 1], device="cuda")
    values = torch.full((4, dim), 7.0, device="cuda")
    cache.write_rows(rows_to_write, values)
    assert torch.equal(cache.lookup(rows_to_write), values)
    table.write_rows(rows_to_write, values * 2)
    torch.cuda.synchronize()
    cache.flush()
    assert torch.equal(cache.lookup(everything), table.lookup(everything))


@needs_gpu
def test_nn_embedding_over_a_cache(comm):
    import wholestore.nn  # noqa: F401
    rows, dim = 500, 8
    make = lambda: ws.EmbeddingTable(comm, rows, dim, "float32", "chunked", "host",  # noqa
                                     optimizer="adagrad", init_range=(-1, 1), seed=8)
    table, twin = make(), make()
    cached = ws.nn.Embedding(ws.DeviceCache(table, np.arange(0, rows, 3)), lr=0.1)
    plain = ws.nn.Embedding(twin, lr=0.1)
    for idx, grad in gpu_batches(rows, 300, dim, 3, count=3):
        for module in (cached, plain):
            (module(idx.view(30, 10)) * grad.view(30, 10, dim)).sum().backward()
    everything = torch.arange(rows, device="cuda")
    assert torch.equal(table.lookup(everything), twin.lookup(everything))
