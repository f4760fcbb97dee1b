"""The library's exceptions in Python: each a subclass of WholestoreError and of the builtin that
says what went wrong (a missing file FileNotFoundError, an index out of range IndexError, a bad
argument ValueError, a peer timeout TimeoutError, out of memory MemoryError), the old names
still there (LogicError, PeerTimeoutError, ...), and messages without the library's source
locations unless WHOLESTORE_DEBUG=1."""

import errno

import numpy as np
import pytest

import wholestore as ws
from conftest import free_port


def raised(call, expected):
    with pytest.raises(expected) as info:
        call()
    assert isinstance(info.value, ws.WholestoreError), type(info.value).__mro__
    return info.value


@pytest.fixture(autouse=True)
def no_debug(monkeypatch):
    monkeypatch.delenv("WHOLESTORE_DEBUG", raising=False)


@pytest.fixture(scope="module")
def graph(comm):
    return ws.make_graph(comm, ws.generate_graph(100, 500, seed=1, feature_dim=4))


def test_the_classes_subclass_the_base_and_the_builtin():
    pairs = {ws.LogicError: ValueError, ws.MismatchError: ws.LogicError,
             ws.IndexOutOfRangeError: IndexError, ws.NotFoundError: FileNotFoundError,
             ws.PeerTimeoutError: TimeoutError, ws.Interrupted: ws.PeerTimeoutError,
             ws.OutOfMemoryError: MemoryError, ws.CudaError: RuntimeError,
             ws.NcclError: RuntimeError, ws.SystemCallError: RuntimeError}
    for cls, builtin in pairs.items():
        assert issubclass(cls, ws.WholestoreError) and issubclass(cls, builtin), cls
    # What code written against the earlier classes catches still catches them.
    assert issubclass(ws.IndexOutOfRangeError, ws.LogicError)
    assert issubclass(ws.PeerTimeoutError, RuntimeError)
    assert not issubclass(ws.NotFoundError, ValueError)
    assert ws.LogicError.__module__ == "wholestore._core"


@pytest.mark.parametrize("read", ["read_dataset", "read_manifest", "load_graph"])
def test_a_missing_dataset_directory_is_file_not_found(comm, tmp_path, read):
    missing = tmp_path / "no-such-dataset"
    call = {"read_dataset": lambda: ws.read_dataset(missing),
            "read_manifest": lambda: ws.read_manifest(missing),
            "load_graph": lambda: ws.load_graph(comm, missing)}[read]
    e = raised(call, FileNotFoundError)
    assert type(e) is ws.NotFoundError and e.errno == errno.ENOENT
    assert f"{missing}: no such dataset directory (it does not exist)" in str(e), str(e)
    assert ".cpp:" not in str(e) and "failed:" not in str(e), str(e)


def test_a_missing_file_in_a_dataset_and_a_missing_edge_list(tmp_path):
    ws.write_dataset(tmp_path / "ds", ws.generate_graph(50, 200, seed=1))
    (tmp_path / "ds" / "col_indices.bin").unlink()
    e = raised(lambda: ws.read_dataset(tmp_path / "ds"), FileNotFoundError)
    assert "col_indices.bin" in str(e) and ".cpp:" not in str(e), str(e)
    # An operating-system call's ENOENT (a system_error in C++).
    e = raised(lambda: ws.convert_edge_list(tmp_path / "edges.txt"), FileNotFoundError)
    assert "edges.txt: cannot open" in str(e) and ".cpp:" not in str(e), str(e)


def test_a_directory_that_is_a_file_is_a_bad_argument_not_a_missing_file(tmp_path):
    (tmp_path / "plain").write_text("x")
    e = raised(lambda: ws.read_dataset(tmp_path / "plain"), ws.LogicError)
    assert not isinstance(e, FileNotFoundError) and "it is not a directory" in str(e)


def test_indices_out_of_range_are_index_errors(comm, graph):
    table = ws.EmbeddingTable(comm, 10, 4)
    memory = ws.WholeMemory(comm, (10, 3))
    cases = [(lambda: table.lookup(np.array([3, 10])), "index 10 at position 1"),
             (lambda: table.lookup(np.array([-1])), "index -1 at position 0"),
             (lambda: memory.gather(np.array([11])), "index 11 at position 0"),
             (lambda: graph.sample(np.array([5, 100]), [2]), "seed 100 at position 1"),
             (lambda: graph.gather_features(np.array([100])), "index 100 at position 0"),
             (lambda: graph.random_walks(np.array([0, 1, 100]), length=3), "at position 2")]
    for call, text in cases:
        e = raised(call, IndexError)
        assert isinstance(e, ws.IndexOutOfRangeError) and isinstance(e, ws.LogicError)
        assert text in str(e) and ".cpp:" not in str(e), str(e)
    memory.free()
    table.free()


def test_bad_arguments_are_value_errors(comm, graph):
    cases = [(lambda: ws.WholeMemory(comm, (10, 3), type="sideways"), "sideways"),
             (lambda: graph.sample(np.array([1]), [2], method="bogus"), "bogus"),
             (lambda: ws.EmbeddingTable(comm, 10, 4, optimizer="bogus"), "bogus"),
             (lambda: ws.generate_sbm(100, 5, homophily=2.0), "homophily")]
    for call, text in cases:
        e = raised(call, ValueError)
        assert type(e) is ws.LogicError, type(e)
        assert text in str(e) and ".cpp:" not in str(e) and "failed:" not in str(e), str(e)


def test_out_of_memory_is_a_memory_error(comm):
    e = raised(lambda: ws.WholeMemory(comm, (2 ** 40, 1024), "float32"), MemoryError)
    assert type(e) is ws.OutOfMemoryError and ".cpp:" not in str(e), str(e)


def test_a_peer_that_never_comes_is_a_timeout_error():
    e = raised(lambda: ws.init(0, 2, "127.0.0.1", free_port(), timeout=0.5, device=None),
               TimeoutError)
    assert type(e) is ws.PeerTimeoutError and isinstance(e, RuntimeError)
    assert "rank 1 did not connect" in str(e) and ".cpp:" not in str(e), str(e)


def test_debug_keeps_the_source_locations(monkeypatch, tmp_path, graph):
    monkeypatch.setenv("WHOLESTORE_DEBUG", "1")
    e = raised(lambda: ws.read_dataset(tmp_path / "missing"), FileNotFoundError)
    assert "(it does not exist) (dataset.cpp:" in str(e) and "failed: " in str(e), str(e)
    e = raised(lambda: graph.sample(np.array([100]), [2]), IndexError)
    assert ".cpp:" in str(e), str(e)
    # Only "1" turns it on, as in the program.
    monkeypatch.setenv("WHOLESTORE_DEBUG", "yes")
    e = raised(lambda: graph.sample(np.array([100]), [2]), IndexError)
    assert ".cpp:" not in str(e), str(e)


def test_a_message_wrapped_by_two_layers_loses_both_locations(comm, tmp_path, monkeypatch):
    # load_graph's message wraps read_manifest's: two location groups, the inner one with a
    # failed check that holds parentheses.
    e = raised(lambda: ws.load_graph(comm, tmp_path / "missing"), FileNotFoundError)
    assert str(e).endswith("no such dataset directory (it does not exist)"), str(e)
    monkeypatch.setenv("WHOLESTORE_DEBUG", "1")
    e = raised(lambda: ws.load_graph(comm, tmp_path / "missing"), FileNotFoundError)
    assert str(e).count(".cpp:") == 2, str(e)
