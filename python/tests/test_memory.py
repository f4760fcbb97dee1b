"""WholeMemory from Python: every type of host memory, views, gather/scatter against numpy
indexing, dtype conversions, DLPack round trips, store/load, and the error paths."""

import numpy as np
import pytest

import wholestore as ws

TYPES = ["continuous", "chunked", "distributed"]
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"]


def filled(m, rng):
    """Writes random values into the local part of m and returns the whole content (one rank:
    the local part is everything)."""
    view = m.local_view()
    if np.issubdtype(view.dtype, np.integer):
        view[...] = rng.integers(0, 100, size=view.shape)
    else:
        view[...] = rng.standard_normal(view.shape)
    return view.copy()


@pytest.mark.parametrize("type", TYPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_scatter_match_numpy(comm, type, dtype):
    rng = np.random.default_rng(1)
    m = ws.WholeMemory(comm, (37, 5), dtype, type, "host")
    assert m.shape == (37, 5) and m.dtype == dtype and m.type == type and m.location == "host"
    assert m.local_rows == (0, 37)
    ref = filled(m, rng)
    for index_dtype in (np.int32, np.int64):
        idx = rng.integers(0, 37, size=50).astype(index_dtype)
        idx[:2] = [0, 36]  # both ends
        np.testing.assert_array_equal(m.gather(idx), ref[idx])
    # Scatter with duplicates: the last occurrence wins, as numpy's fancy assignment.
    idx = np.array([3, 7, 3, 36, 0], dtype=np.int64)
    values = (np.arange(25).reshape(5, 5) + 1).astype(dtype)
    m.scatter(values, idx)
    ref[idx] = values
    np.testing.assert_array_equal(m.local_view(), ref)
    np.testing.assert_array_equal(m.gather(np.arange(37)), ref)
    m.free()


@pytest.mark.parametrize("type", TYPES)
def test_one_dim_memory_and_empty_index_list(comm, type):
    m = ws.WholeMemory(comm, 11, "int64", type, "host")
    assert m.shape == (11,) and len(m) == 11
    m.local_view()[:] = np.arange(11) * 10
    out = m.gather([10, 0, 5])
    assert out.shape == (3,)
    np.testing.assert_array_equal(out, [100, 0, 50])
    empty = m.gather(np.zeros(0, np.int64))
    assert empty.shape == (0,)
    m.scatter([7, 8], [1, 2])
    np.testing.assert_array_equal(m.gather([0, 1, 2, 3]), [0, 7, 8, 30])


def test_zero_rows(comm):
    m = ws.WholeMemory(comm, (0, 4), "float32", "chunked", "host")
    assert m.local_view().shape == (0, 4)
    assert m.gather(np.zeros(0, np.int64)).shape == (0, 4)


@pytest.mark.parametrize("out_dtype", ["float16", "float64"])
def test_gather_converts_floats(comm, out_dtype):
    m = ws.WholeMemory(comm, (9, 3), "float32", "continuous", "host")
    ref = filled(m, np.random.default_rng(2))
    out = np.empty((4, 3), dtype=out_dtype)
    assert m.gather([8, 1, 1, 0], out=out) is out
    np.testing.assert_array_equal(out, ref[[8, 1, 1, 0]].astype(out_dtype))


def test_gather_into_strided_rows(comm):
    m = ws.WholeMemory(comm, (6, 3), "float32", "continuous", "host")
    ref = filled(m, np.random.default_rng(3))
    wide = np.zeros((2, 5), np.float32)
    m.gather([5, 2], out=wide[:, :3])
    np.testing.assert_array_equal(wide[:, :3], ref[[5, 2]])
    np.testing.assert_array_equal(wide[:, 3:], 0)


def test_views_are_zero_copy(comm):
    m = ws.WholeMemory(comm, (8, 2), "float64", "continuous", "host")
    whole = m.whole_view()
    first, part = m.part_view(0)
    assert first == 0 and part.shape == (8, 2)
    whole[3] = [1.5, 2.5]
    np.testing.assert_array_equal(m.local_view()[3], [1.5, 2.5])
    np.testing.assert_array_equal(part[3], [1.5, 2.5])
    np.testing.assert_array_equal(m.gather([3]), [[1.5, 2.5]])
    p = m.part(0)
    assert p["offset"] == 0 and p["bytes"] == 8 * 2 * 8 and p["rank"] == 0 and p["mapped"]
    assert p["device"] == -1


def test_dlpack_round_trip(comm):
    m = ws.WholeMemory(comm, (5, 4), "float32", "chunked", "host")
    ref = filled(m, np.random.default_rng(4))
    # store -> numpy without a copy: the DLPack consumer sees the same bytes.
    shared = np.from_dlpack(m.local_view())
    shared[0, 0] = 42.0
    assert m.gather([0])[0, 0] == 42.0
    ref[0, 0] = 42.0
    # numpy -> store: any DLPack producer is accepted as indices, values and out.

    class Producer:
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    out = np.zeros((2, 4), np.float32)
    m.gather(Producer(np.array([4, 0], np.int64)), out=Producer(out))
    np.testing.assert_array_equal(out, ref[[4, 0]])


def test_store_and_load(comm, tmp_path):
    a = ws.WholeMemory(comm, (20, 3), "int32", "continuous", "host")
    ref = filled(a, np.random.default_rng(5))
    a.store(tmp_path / "store")
    b = ws.WholeMemory(comm, (20, 3), "int32", "distributed", "host")
    b.load(tmp_path / "store")
    np.testing.assert_array_equal(b.local_view(), ref)
    c = ws.WholeMemory(comm, (21, 3), "int32", "chunked", "host")
    with pytest.raises(ws.LogicError, match="byte"):
        c.load(tmp_path / "store")


# ---- error paths ----

def test_out_of_range_index_names_it(comm):
    m = ws.WholeMemory(comm, (10, 2), "float32", "chunked", "host")
    out = np.full((3, 2), 7.0, np.float32)
    with pytest.raises(ws.LogicError) as e:
        m.gather(np.array([1, 10, 2]), out=out)
    assert isinstance(e.value, ValueError)
    assert "index 10 at position 1 is outside the table of 10 rows" in str(e.value)
    np.testing.assert_array_equal(out, 7.0)  # untouched
    with pytest.raises(ValueError, match="index -1 at position 0"):
        m.scatter(np.zeros((1, 2), np.float32), [-1])


def test_wrong_dtype_and_shape(comm):
    m = ws.WholeMemory(comm, (10, 2), "float32", "chunked", "host")
    with pytest.raises(ValueError, match="indices must be int32 or int64, got float64"):
        m.gather(np.array([1.0]))
    with pytest.raises(ValueError, match="indices must be 1-D"):
        m.gather(np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match=r"out has shape \(2, 3\), expected 2 columns"):
        m.gather([1, 2], out=np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="out has 3 rows, expected 2"):
        m.gather([1, 2], out=np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="out has dtype complex64"):
        m.gather([1, 2], out=np.zeros((2, 2), np.complex64))
    with pytest.raises(ValueError, match="contiguous rows"):
        m.gather([1, 2], out=np.zeros((2, 4), np.float32)[:, ::2])
    with pytest.raises(ws.LogicError, match="float"):
        m.gather([1, 2], out=np.zeros((2, 2), np.int32))  # float <-> int is refused
    ro = np.zeros((2, 2), np.float32)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):  # nanobind refuses a read-only out
        m.gather([1, 2], out=ro)


def test_bad_names_and_freed_memory(comm):
    with pytest.raises(ws.LogicError, match="sideways"):
        ws.WholeMemory(comm, 4, "float32", "sideways", "host")
    with pytest.raises(ValueError, match="dtype 'complex64' is not one of"):
        ws.WholeMemory(comm, 4, "complex64")
    m = ws.WholeMemory(comm, 4, "float32", "chunked", "host")
    with pytest.raises(ws.LogicError, match="continuous"):
        m.whole_view()
    with pytest.raises(IndexError, match="part 3 is not in"):
        m.part_view(3)
    m.free()
    with pytest.raises(ValueError, match="freed"):
        m.gather([0])
    assert repr(m) == "WholeMemory(freed)"


@pytest.mark.skipif(ws.cuda_built(), reason="checks the message of a build without CUDA")
def test_device_memory_without_cuda(comm):
    with pytest.raises(ws.LogicError, match="CUDA"):
        ws.WholeMemory(comm, 4, "float32", "continuous", "device")


# ---- jobs ----

def test_one_rank_job(comm):
    assert (comm.rank, comm.size, comm.local_rank, comm.local_size) == (0, 1, 0, 1)
    assert comm.backend == "host" and comm.num_hosts == 1 and not comm.broken
    comm.barrier()
    assert comm.allgather_bytes(b"abc") == [b"abc"]


def test_read_launch_env(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert ws.read_launch_env() is None
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("MASTER_ADDR", "10.1.2.3")
    monkeypatch.setenv("MASTER_PORT", "1234")
    env = ws.read_launch_env()
    assert (env["rank"], env["size"], env["master_addr"], env["master_port"]) == (
        2, 4, "10.1.2.3", 1234)
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ws.LogicError, match="WORLD_SIZE"):
        ws.read_launch_env()


def test_init_arguments():
    with pytest.raises(ValueError, match="pass both rank and size"):
        ws.init(rank=0)
    with pytest.raises(ValueError, match="timeout -1"):
        ws.init(timeout=-1)
    with pytest.raises(ValueError, match="master_addr/master_port need rank and size"):
        ws.init(master_port=1234)


class InterfaceOnly:
    """An array that offers only __cuda_array_interface__ (as Numba's device arrays do), here
    over a numpy buffer: without a GPU (or with pageable memory) the library treats it as host
    memory and the CPU paths read and write it in place."""

    def __init__(self, array, version=3, **override):
        self.array = array
        iface = {"shape": array.shape, "typestr": array.dtype.str,
                 "data": (array.ctypes.data, False), "version": version, "strides": None}
        if version >= 3:
            iface["stream"] = None
        iface.update(override)
        self.__cuda_array_interface__ = iface


def test_cuda_array_interface_import(comm):
    m = ws.WholeMemory(comm, (40, 3), "float32", "chunked", "host")
    values = np.arange(120, dtype=np.float32).reshape(40, 3)
    m.scatter(InterfaceOnly(values), InterfaceOnly(np.arange(40, dtype=np.int64)))
    out = np.zeros((3, 3), np.float32)
    got = m.gather(InterfaceOnly(np.array([39, 0, 7], np.int64)), out=InterfaceOnly(out))
    np.testing.assert_array_equal(out, values[[39, 0, 7]])  # written in place
    assert isinstance(got, InterfaceOnly)  # the caller's object comes back
    # Without out=, the output is allocated like the indices: numpy for host memory.
    host_out = m.gather(InterfaceOnly(np.array([5], np.int64)))
    np.testing.assert_array_equal(host_out, values[[5]])
    v2 = InterfaceOnly(np.array([1, 2], np.int32), version=2)
    np.testing.assert_array_equal(m.gather(v2, out=np.zeros((2, 3), np.float32)), values[[1, 2]])
    idx = np.array([1, 2], np.int64)
    for override, message in [({"typestr": ">i8"}, "little-endian"),
                              ({"typestr": "<c8"}, "not a supported type"),
                              ({"strides": (16,)}, "not C-contiguous"),
                              ({"version": 1}, "version 1"),
                              ({"stream": 0}, "stream 0")]:
        with pytest.raises(ValueError, match=message):
            m.gather(InterfaceOnly(idx, **override), out=np.zeros((2, 3), np.float32))
    broken = InterfaceOnly(idx)
    del broken.__cuda_array_interface__["data"]
    with pytest.raises(ValueError, match="'data'"):
        m.gather(broken, out=np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        m.gather(idx, out=InterfaceOnly(np.zeros((2, 3), np.float32),
                                        data=(np.zeros(6, np.float32).ctypes.data, True)))


def test_wrong_argument_types_name_the_argument(comm):
    """TypeError naming the argument and what it must be, not nanobind's C++ signatures."""
    m = ws.WholeMemory(comm, (4, 2))
    cases = [
        (lambda: ws.WholeMemory(None, 4), "comm must be a wholestore Communicator"),
        (lambda: ws.WholeMemory(comm, "4"), "shape must be an int or a tuple"),
        (lambda: ws.WholeMemory(comm, (4, 2.5)), "shape must be an integer"),
        (lambda: ws.WholeMemory(comm, 4, type=None), "type must be a str"),
        (lambda: m.gather(None), "indices must be an array"),
        (lambda: m.gather([0], out="x"), "out must be an array"),
        (lambda: m.scatter(None, [0]), "values must be an array"),
        (lambda: m.part("0"), "i must be an integer"),
        (lambda: m.store(1), "dir must be a path"),
        (lambda: ws.init(rank="0", size=1), "rank must be an integer"),
        (lambda: ws.init(timeout="5"), "timeout must be a number"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError, match=message) as info:
            call()
        assert "incompatible function arguments" not in str(info.value)
