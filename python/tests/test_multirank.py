"""Jobs of several processes from Python: the launch environment, explicit rank/size over TCP,
host memory of every type shared by the ranks, and an embedding table trained by two ranks
that must end bit for bit where one rank ends."""


import numpy as np
import pytest

import wholestore as ws
from conftest import listen_with_next_port_free, run_ranks
from multirank_worker import WALK_CASES, walk_starts
from test_embedding import global_batches


def test_memory_of_every_type_over_two_ranks(tmp_path):
    outputs = run_ranks(2, "memory", tmp_path)
    assert all("rank ok: memory" in o for o in outputs)


def test_explicit_rank_size_over_tcp(tmp_path):
    run_ranks(2, "tcp", tmp_path)


def test_beside_torchruns_agent_store(tmp_path):
    """Under torchrun the agent's store listens on MASTER_PORT (torch.distributed's process
    groups meet there); the job's own store must not try to bind it."""
    with listen_with_next_port_free() as agent:
        port = agent.getsockname()[1]
        run_ranks(2, "agent_store", tmp_path,
                  extra_env={"MASTER_PORT": str(port), "TORCHELASTIC_USE_AGENT_STORE": "True"})


def test_two_ranks_train_like_one(comm, tmp_path):
    run_ranks(2, "embedding", tmp_path)
    one = ws.EmbeddingTable(comm, 40, 6, "float32", "continuous", "host", optimizer="adam",
                            init_range=(-1, 1), seed=4)
    for indices, grads, lr in global_batches(1):
        one.apply_gradients(indices[0], grads[0], lr)
    expected = one.lookup(np.arange(40))
    for rank in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"weights{rank}.npy"), expected)
    # The two ranks' checkpoint loads into one rank's table of another type.
    back = ws.EmbeddingTable(comm, 40, 6, "float32", "chunked", "host", optimizer="adam")
    back.load_checkpoint(tmp_path / "ckpt")
    np.testing.assert_array_equal(back.lookup(np.arange(40)), expected)
    assert back.step == one.step == 3


def test_a_bad_index_on_one_rank_fails_every_rank(tmp_path):
    outputs = run_ranks(2, "bad_index", tmp_path)
    for out in outputs:
        assert "LogicError:" in out and "index 10" in out, out


def test_a_nan_gradient_on_one_rank_fails_every_rank(tmp_path):
    outputs = run_ranks(2, "nan_gradient", tmp_path)
    assert "ValueError: apply_gradients: grads holds nan at row 0, column 1" in outputs[1]
    assert ("ValueError: apply_gradients: the grads of rank 1 hold a non-finite value at row 0"
            in outputs[0]), outputs[0]


def test_free_of_two_ranks_waits_for_each_ranks_calls(tmp_path):
    outputs = run_ranks(2, "free_during_lookups", tmp_path)
    assert all("rank ok: free_during_lookups" in o for o in outputs), outputs


def test_walks_on_a_distributed_graph_over_two_ranks(comm, tmp_path):
    """DeepWalk and node2vec on a graph in distributed memory, each rank walking half of the
    starts: together the walks one rank takes on the graph in continuous memory."""
    run_ranks(2, "walks", tmp_path)
    g = ws.make_graph(comm, ws.generate_graph(600, 5000, seed=3, symmetrize=True), "continuous",
                      "host")
    for name, p, q in WALK_CASES:
        want = g.random_walks(walk_starts(), length=9, p=p, q=q, seed=11)
        got = np.concatenate([np.load(tmp_path / f"{name}{rank}.npy") for rank in range(2)])
        np.testing.assert_array_equal(got, want, err_msg=name)
