"""wholestore.distributed: nvmath-python's initialize / allocate_symmetric_memory /
free_symmetric_memory over the symmetric heap.  One rank here (numpy, shared host memory; torch
and CuPy on a GPU), two ranks in processes (peers' blocks, uneven sizes refused on every rank,
make_symmetric), on the host heap everywhere and on two GPUs where there are two."""

import numpy as np
import pytest

import wholestore as ws
import wholestore.distributed as dist
from conftest import has_gpu, run_ranks


@pytest.fixture
def context(comm):
    dist.initialize(None, comm)
    yield comm
    for heap, _ in list(dist._heaps.values()):
        heap.free()
    dist._heaps.clear()
    dist.finalize()


def test_needs_initialize_once():
    with pytest.raises(RuntimeError, match="not initialized"):
        dist.allocate_symmetric_memory(3, np)
    assert dist.get_context() is None


def test_host_arrays_shapes_dtypes_and_order(context):
    with pytest.raises(RuntimeError, match="already initialized"):
        dist.initialize(None, context)
    a = dist.allocate_symmetric_memory((3, 4), np, dtype=np.float32)
    assert a.shape == (3, 4) and a.dtype == np.float32 and a.flags.c_contiguous
    b = dist.allocate_symmetric_memory(5, np)  # numpy's default dtype
    assert b.shape == (5,) and b.dtype == np.float64
    f = dist.allocate_symmetric_memory((2, 3), np, dtype=np.int16, axis_order="F")
    assert f.shape == (2, 3) and f.flags.f_contiguous and not f.flags.c_contiguous
    a[:] = np.arange(12).reshape(3, 4)
    f[:] = [[1, 2, 3], [4, 5, 6]]
    # The one rank's peer view is its own block: the same bytes, the same layout.
    np.testing.assert_array_equal(dist.peer_view(a, 0), a)
    np.testing.assert_array_equal(dist.peer_view(f, 0), f)
    dist.peer_view(a, 0)[1, 1] = -1
    assert a[1, 1] == -1
    with pytest.raises(IndexError, match="rank 1 is not in"):
        dist.peer_view(a, 1)
    with pytest.raises(ValueError, match="'C' or 'F'"):
        dist.allocate_symmetric_memory(3, np, axis_order="K")
    with pytest.raises(ValueError, match="not cupy, torch or numpy"):
        dist.allocate_symmetric_memory(3, pytest)


def test_device_packages_need_a_device(context):
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match="need a device"):
        dist.allocate_symmetric_memory(3, torch)


def test_free_is_checked(context):
    a = dist.allocate_symmetric_memory(4, np, dtype=np.int32)
    b = dist.allocate_symmetric_memory(4, np, dtype=np.int32)
    with pytest.raises(ValueError, match="array 1 was not allocated"):
        dist.free_symmetric_memory(a, np.zeros(4))
    with pytest.raises(RuntimeError, match="still allocated"):
        dist.finalize()
    dist.free_symmetric_memory(a, b)
    with pytest.raises(ValueError, match="array 0 was not allocated"):
        dist.free_symmetric_memory(a)
    with pytest.raises(ws.LogicError, match="0 bytes"):
        dist.allocate_symmetric_memory((0, 3), np)


@pytest.mark.skipif(not has_gpu(), reason="needs a GPU")
def test_device_arrays_in_torch_and_cupy(comm):
    dist.initialize(ws.current_device(), comm)
    try:
        for package_name in ("torch", "cupy"):
            package = pytest.importorskip(package_name)
            a = dist.allocate_symmetric_memory((4, 5), package, dtype=package.float32)
            a[:] = 3.0
            assert float(a.sum()) == 60.0
            peer = dist.peer_view(a, 0)
            assert float(peer.sum()) == 60.0
            dist.free_symmetric_memory(a)
    finally:
        dist.finalize()


def test_two_ranks_reach_each_others_blocks(tmp_path):
    outputs = run_ranks(2, "symmetric", tmp_path)
    assert all("rank ok: symmetric" in o for o in outputs)
