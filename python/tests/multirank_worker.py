"""One rank of a multi-rank test (conftest.run_ranks starts it with the launch environment):
python multirank_worker.py SCENARIO OUT_DIR."""

import os
import sys

import numpy as np

import wholestore as ws


def memory(comm, out_dir):
    rank, size = comm.rank, comm.size
    for type in ("continuous", "chunked", "distributed"):
        m = ws.WholeMemory(comm, (13, 3), "float32", type, "host")
        begin, end = m.local_rows
        rows = np.arange(begin, end)
        m.local_view()[:] = rows[:, None] * 10 + np.arange(3)
        comm.barrier()
        expected = np.arange(13)[:, None] * 10.0 + np.arange(3)
        idx = np.random.default_rng(rank).integers(0, 13, size=20 + rank)
        np.testing.assert_array_equal(m.gather(idx), expected[idx])
        comm.barrier()  # every rank has read before any writes
        # Each rank writes rows at the other end; distributed memory makes this collective.
        mine = np.array([0, 1]) if rank == 0 else np.array([11, 12])
        m.scatter(np.full((2, 3), -1.0 - rank, np.float32), mine)
        comm.barrier()
        expected[[0, 1]] = -1.0
        expected[[11, 12]] = -2.0
        np.testing.assert_array_equal(m.gather(np.arange(13)), expected)
        comm.barrier()
        m.free()
    sizes = comm.allgather_bytes(str(rank).encode())
    assert sizes == [str(r).encode() for r in range(size)]


def embedding(comm, out_dir):
    import test_embedding  # the batch the one-rank run in the test applies

    t = ws.EmbeddingTable(comm, 40, 6, "float32", "distributed", "host", optimizer="adam",
                          init_range=(-1, 1), seed=4)
    for indices, grads, lr in test_embedding.global_batches(comm.size):
        t.apply_gradients(indices[comm.rank], grads[comm.rank], lr)
    np.save(os.path.join(out_dir, f"weights{comm.rank}.npy"), t.lookup(np.arange(40)))
    t.store_checkpoint(os.path.join(out_dir, "ckpt"))


def tcp(comm_unused, out_dir):
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    port = int(os.environ["MASTER_PORT"])
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        del os.environ[name]
    assert ws.read_launch_env() is None
    comm = ws.init(rank, size, "127.0.0.1", port)
    assert (comm.rank, comm.size) == (rank, size)
    comm.barrier()


def agent_store(comm, out_dir):
    # The test holds MASTER_PORT as torchrun's agent does; the job met on the next port.
    assert ws.read_launch_env()["master_port"] == int(os.environ["MASTER_PORT"]) + 1
    assert comm.allgather_bytes(bytes([comm.rank])) == [bytes([r]) for r in range(comm.size)]


def symmetric(comm, out_dir):
    import wholestore.distributed as dist

    rank, other = comm.rank, 1 - comm.rank
    gpu = ws.cuda_built() and ws.device_count() > 1
    packages = [np]
    if gpu:
        import torch  # before initialize, which makes the rank's GPU torch's current device
        packages.append(torch)
    dist.initialize(ws.current_device() if gpu else None, comm)
    if gpu:
        assert torch.cuda.current_device() == ws.current_device() == rank
    for package in packages:
        a = dist.allocate_symmetric_memory((6, 3), package, dtype=package.float32)
        a[:] = rank + 1
        if package is not np:
            package.cuda.synchronize()
        comm.barrier()  # both blocks written
        peer = dist.peer_view(a, other)
        assert float(peer.sum()) == 18 * (other + 1), (package.__name__, peer)
        peer[0, 0] = -5  # a store into the other rank's block
        if package is not np:
            package.cuda.synchronize()
        comm.barrier()
        assert float(a[0, 0]) == -5 and float(a.sum()) == 17 * (rank + 1) - 5
        comm.barrier()
        dist.free_symmetric_memory(a)
    # Sizes that differ: refused on every rank, naming both; make_symmetric pads to the largest.
    try:
        dist.allocate_symmetric_memory(4 + rank, np, dtype=np.int64)
        raise AssertionError("uneven sizes were accepted")
    except ws.MismatchError as e:
        assert "rank 0: 32" in str(e) and "rank 1: 40" in str(e) and "make_symmetric" in str(e)
    b = dist.allocate_symmetric_memory(4 + rank, np, dtype=np.int64, make_symmetric=True)
    assert b.shape == (4 + rank,)
    b[:] = rank
    comm.barrier()
    assert list(dist.peer_view(b, other)[:4]) == [other] * 4
    comm.barrier()
    dist.free_symmetric_memory(b)
    dist.finalize()


WALK_CASES = (("deepwalk", 1.0, 1.0), ("node2vec", 0.5, 2.0))


def walk_starts():
    return np.arange(600, dtype=np.int64).repeat(3)


def walks(comm, out_dir):
    """Each rank walks its slice of the starts on a distributed graph (collectively: every
    step served by the owners of the walks' nodes) and saves its walks."""
    rank, size = comm.rank, comm.size
    g = ws.make_graph(comm, ws.generate_graph(600, 5000, seed=3, symmetrize=True), "distributed",
                      "host")
    starts = walk_starts()
    lo, hi = len(starts) * rank // size, len(starts) * (rank + 1) // size
    for name, p, q in WALK_CASES:
        w = g.random_walks(starts[lo:hi], length=9, p=p, q=q, seed=11, first_walk=lo)
        np.save(os.path.join(out_dir, f"{name}{rank}.npy"), w)
    # A rank without starts still takes part.
    w = g.random_walks(starts[:0] if rank == 1 else starts[:5], length=4, seed=2)
    assert w.shape == ((0 if rank == 1 else 5), 5)


def train(comm, out_dir):
    """wholestore.train on both ranks (test_train's SMALL config): a dim that differs between
    the ranks fails on both; then each schedule, rank 0 saving the embeddings."""
    import test_train

    try:
        ws.train(comm=comm, **{**test_train.SMALL, "dim": 16 + comm.rank})
        raise AssertionError("ranks with different settings trained")
    except ws.MismatchError as e:
        print("MismatchError:", e)
    for name, extra in test_train.SCHEDULES.items():
        r = ws.train(comm=comm, **test_train.SMALL, **extra)
        assert r.ranks == 2 and (r.embeddings is None) == (comm.rank != 0)
        if comm.rank == 0:
            np.save(os.path.join(out_dir, f"{name}.npy"), r.embeddings)


def bad_index(comm, out_dir):
    t = ws.EmbeddingTable(comm, 10, 2, type="chunked", optimizer="sgd")
    index = 10 if comm.rank == 1 else 0
    try:
        t.apply_gradients([index], np.ones((1, 2), np.float32), 0.1)
    except ws.LogicError as e:
        print("LogicError:", e)
    assert t.step == 0


def nan_gradient(comm, out_dir):
    """A NaN in rank 1's gradients: every rank raises (rank 0 naming rank 1) with nothing
    changed, and the ranks stay in step (the next good step runs on both)."""
    t = ws.EmbeddingTable(comm, 10, 2, type="chunked", optimizer="adam")
    before = t.lookup(np.arange(10))
    grads = np.ones((1, 2), np.float32)
    if comm.rank == 1:
        grads[0, 1] = np.nan
    try:
        t.apply_gradients([comm.rank], grads, 0.1)
        raise AssertionError("a NaN gradient was accepted")
    except ValueError as e:
        print("ValueError:", e)
    assert t.step == 0
    np.testing.assert_array_equal(t.lookup(np.arange(10)), before)
    t.apply_gradients([comm.rank], np.ones((1, 2), np.float32), 0.1)
    assert t.step == 1
    t.free()


def free_during_lookups(comm, out_dir):
    """Threads of each rank loop lookups of a two-rank table while its main thread frees it
    (collective): each rank's free waits for its own calls in flight, then the ranks free
    together; every lookup before it is right, every one after it raises the ValueError."""
    import threading
    import time

    t = ws.EmbeddingTable(comm, 50000, 32, type="chunked")
    idx = np.random.default_rng(comm.rank).integers(0, 50000, 4096)
    expected = t.lookup(idx)
    counts, wrong, ended = [0] * 3, [0] * 3, [None] * 3

    def loop(i):
        try:
            while True:
                wrong[i] += not np.array_equal(t.lookup(idx), expected)
                counts[i] += 1
        except ValueError as e:
            ended[i] = str(e)

    workers = [threading.Thread(target=loop, args=(i,)) for i in range(3)]
    for w in workers:
        w.start()
    time.sleep(0.05)
    comm.barrier()
    t.free()
    for w in workers:
        w.join(60)
    print("calls", counts, "wrong", wrong, "ended", ended)
    assert ended == ["this embedding table was freed"] * 3 and wrong == [0] * 3


LOADER_NODES = 600


def loader_graph():
    return ws.generate_graph(LOADER_NODES, 5000, seed=3, symmetrize=True, feature_dim=3)


def loader_seeds():
    """Seeds that no rank count up to 4 divides evenly: 301 = 7 * 43."""
    return np.arange(0, LOADER_NODES, 2)[:301]


def loader(comm, out_dir):
    """NeighborLoaders on a graph in distributed memory (collective sampling and gathers) over
    seeds that the ranks cannot share evenly: each rank saves the batches of two epochs, with
    and without drop_last; then settings that differ between the ranks fail on every rank."""
    import pickle

    g = ws.make_graph(comm, loader_graph(), "distributed", "host")
    labels = np.arange(LOADER_NODES) * 10
    runs = {}
    for drop_last in (False, True):
        # The scenario makes no other call on the communicator while it iterates.
        loader = ws.NeighborLoader(g, loader_seeds(), [3, 2], 16, comm=comm, seed=7,
                                   drop_last=drop_last, labels=labels, prefetch="always")
        assert loader.prefetching
        epochs = []
        for epoch in range(2):
            batches = []
            for b in loader:
                batches.append({"seeds": b.seeds, "num_padded": b.num_padded,
                                "random_seed": b.random_seed, "labels": b.labels,
                                "features": b.features,
                                "blocks": [(x.num_dst, x.src_nodes, x.offsets, x.src_index)
                                           for x in b.blocks]})
            epochs.append(batches)
        runs[drop_last] = {"len": len(loader), "epochs": epochs}
    comm.barrier()  # every rank made as many collective calls: none is left waiting
    with open(os.path.join(out_dir, f"loader{comm.rank}.pkl"), "wb") as f:
        pickle.dump(runs, f)
    try:
        ws.NodeLoader(loader_seeds(), 16 + comm.rank, comm=comm)
        raise AssertionError("ranks with different batch sizes made a loader")
    except ws.MismatchError as e:
        print("MismatchError:", e)


if __name__ == "__main__":
    scenario, out_dir = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    comm = None if scenario == "tcp" else ws.init()  # device "auto": a GPU when there is one
    if comm is not None:
        env = ws.read_launch_env()
        assert (comm.rank, comm.size) == (env["rank"], env["size"])
    globals()[scenario](comm, out_dir)
    print(f"rank ok: {scenario}")
