"""Mini-batches for a training loop: seeds with their sampled neighborhoods and features
(NeighborLoader), or seeds alone (NodeLoader), shuffled per epoch as a function of (seed, epoch)
only, shared out over the ranks of a job so that every rank runs the same number of batches,
and the next batch prepared on a worker thread while the loop trains on this one.

    loader = ws.NeighborLoader(graph, train_nodes, [15, 10], 1024, comm=comm,
                               labels=host.node_labels)
    for epoch in range(epochs):
        loader.set_epoch(epoch)          # or leave it: each pass over the loader is the next
        for batch in loader:             # batch.seeds, .blocks, .features, .labels
            ...

Shares.  Every rank passes the same seeds and settings (the loader checks once, collectively,
when it is made: MismatchError on every rank naming the first that differs).  An epoch permutes
the seeds with ``np.random.default_rng([seed, epoch])`` (kept in order with shuffle=False) and
cuts the permutation into one contiguous share per rank:

  - drop_last=False: every share holds ceil(n / ranks) seeds.  When ranks do not divide n, the
    permutation is continued from its own start, so the last ranks' shares end with seeds that
    the first ranks also have this epoch (``batch.num_padded`` counts them: they are the last
    seeds of the last batch).  A share never holds a seed twice, so a batch's seeds are
    blocks[0]'s destinations one to one.  Every share is cut into ceil(share / batch_size)
    batches, the last one shorter, the same sizes on every rank.
  - drop_last=True: every share holds floor(n / ranks) seeds (the permutation's last n % ranks
    are left out this epoch) and is cut into floor(share / batch_size) full batches.

Either way every rank runs ``len(loader)`` batches with the same seed counts, so a graph in
distributed memory, whose sample and gather calls are collective, is called the same number of
times on every rank: a loop over the loader cannot leave a rank waiting for another's extra
call.  Leave a loop at the same batch on every rank.

Sampling.  Batch i of an epoch is sampled with ``random_seed`` =
``np.random.SeedSequence([seed, epoch, i]).generate_state(1, np.uint64)[0]`` (``batch.
random_seed``), the same on every rank; ``graph.sample(batch.seeds, fanouts, method,
batch.random_seed)`` gives the batch's blocks again.  Host-located graphs use the CPU sampler,
device-located ones the GPU sampler (``device="cuda"`` asks for it on a host graph too): seeds,
blocks and features are then CUDA tensors (torch; CuPy arrays without torch) on the current
device.

Prefetch.  With ``prefetch`` the loader samples and gathers batch i + 1 on a worker thread while
the loop has batch i (the library releases the GIL in both).  A graph in distributed memory
makes both calls collectives on the graph's communicator, which runs one call at a time per
rank: a worker's collective beside one of the loop's own (a distributed table's lookup or
update, a barrier on the same communicator) could meet its peers' calls in another order.  So
on such a graph prefetch=True prepares batches on the calling thread, and prefetch="always"
prefetches anyway, for a loop that makes no other call on that communicator while it iterates
(after leaving such a loop early, ``loader.close()`` waits for the batch in preparation).  The
rule reads the topology's memory type (``graph.type``): a graph whose features alone are
distributed (load_graph's features_type) needs prefetch=False beside collectives of the loop.
``loader.prefetching`` says which.  A new pass over the loader first waits for the batch the
previous pass was preparing.
"""

import hashlib
import json
import sys
import threading
from dataclasses import dataclass

import numpy as np

from . import _arrays, _checks, _core
from .graph import GpuSampler, Graph, _fanouts, to_pyg


@dataclass(eq=False)
class Batch:
    """One mini-batch.  ``seeds``: the batch's node ids (int64; numpy, or a CUDA tensor on the
    GPU path); ``blocks``: the sample, in sampling order (blocks[0] has the seeds as
    destinations, a GNN's first layer consumes blocks[-1]; None for a NodeLoader);
    ``features``: the features of ``blocks[-1].src_nodes`` (None without features);
    ``labels``: ``labels[seeds]`` when the loader has labels; ``num_padded``: how many of the
    last seeds repeat seeds another rank has this epoch (count them once in evaluation);
    ``epoch``, ``index`` and the sampler's ``random_seed``."""

    seeds: object
    blocks: list = None
    features: object = None
    labels: object = None
    num_padded: int = 0
    epoch: int = 0
    index: int = 0
    random_seed: int = 0

    @property
    def input_nodes(self):
        """The nodes whose features the first layer reads (``blocks[-1].src_nodes``)."""
        return self.blocks[-1].src_nodes

    def to_pyg(self):
        """``(n_id, adjs)`` as PyG's hop-wise loaders give it (graph.to_pyg)."""
        return to_pyg(self.blocks)


def batch_random_seed(seed, epoch, index):
    """The sampler's random_seed for batch ``index`` of ``epoch``: a function of the three only."""
    return int(np.random.SeedSequence([seed, epoch, index]).generate_state(1, np.uint64)[0])


def _ceil_div(a, b):
    return -(-a // b)


def _non_negative(value, name):
    value = _checks.integer(value, name)
    if value < 0:
        raise ValueError(f"{name} must be at least 0, got {value}")
    return value


def _seed_array(seeds):
    """Seeds as a 1-D int64 numpy array (a copy the caller cannot change under the loader)."""
    if isinstance(seeds, (str, bytes)) or seeds is None:
        raise TypeError(f"seeds must be node ids (an array or a list), not {type(seeds).__name__}")
    if _arrays.on_gpu(seeds):
        raise ValueError("seeds must be in CPU memory (the loader moves each batch's seeds to the "
                         "GPU sampler itself)")
    array = np.asarray(seeds)
    if array.ndim != 1:
        raise ValueError(f"seeds must be 1-D, got shape {array.shape}")
    if array.size and array.dtype.kind not in "iu":
        raise TypeError(f"seeds must be integers, not {array.dtype.name} values")
    return np.array(array, dtype=np.int64)


class _Job:
    """One batch made on a daemon thread (a thread stuck in a collective cannot hold up the
    interpreter's exit)."""

    def __init__(self, make, index):
        self._result = self._error = None
        self._thread = threading.Thread(target=self._run, args=(make, index), daemon=True,
                                        name="wholestore-loader")
        self._thread.start()

    def _run(self, make, index):
        try:
            self._result = make(index)
        except BaseException as e:  # handed to the loop, at the batch it belongs to
            self._error = e

    def result(self):
        """The batch, or the exception making it raised.  Ctrl-C interrupts the wait."""
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._result

    def done(self):
        return not self._thread.is_alive()

    def wait(self):
        if self._thread is not threading.current_thread():
            self._thread.join()


class _Pass:
    """One pass over a loader (an epoch): an iterator of its batches."""

    def __init__(self, loader, epoch):
        self._loader = loader
        self._epoch = epoch
        self._plan = loader._plan(epoch)
        self._next = 0
        self._pending = None

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._plan) - self._next

    def _make(self, index):
        seeds, num_padded = self._plan[index]
        return self._loader._make_batch(seeds, num_padded, self._epoch, index)

    def __next__(self):
        if self._next >= len(self._plan):
            self.close()
            raise StopIteration
        index = self._next
        self._next += 1
        if self._pending is None:
            batch = self._make(index)
        else:
            job = self._pending
            try:
                batch = job.result()
            except BaseException:
                # A failed batch ends the pass.  A wait that Ctrl-C broke leaves the job
                # running: close() still waits for it.
                self._next = len(self._plan)
                if job.done():
                    self._pending = None
                raise
            self._pending = None
        if self._loader.prefetching and self._next < len(self._plan):
            self._pending = _Job(self._make, self._next)
        return batch

    def close(self):
        """Waits for the batch in preparation (if any) and ends the pass."""
        self._next = len(self._plan)
        if self._pending is not None:
            job, self._pending = self._pending, None
            job.wait()


class NodeLoader:
    """Mini-batches of seeds alone (no sampling): the shares, shuffle and batch counts of the
    module's docstring.  ``labels``: an array indexed by node id (numpy, torch or CuPy);
    each batch then has ``labels[seeds]``.  Collective when ``comm`` has several ranks (the
    ranks agree on the seeds and settings)."""

    def __init__(self, seeds, batch_size, *, shuffle=True, drop_last=False, comm=None, seed=0,
                 labels=None):
        self._seeds = _seed_array(seeds)
        self._batch_size = _checks.integer(batch_size, "batch_size")
        if self._batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self._batch_size}")
        self._shuffle = bool(shuffle)
        self._drop_last = bool(drop_last)
        self._seed = _non_negative(seed, "seed")
        if comm is not None:
            _checks.communicator(comm)
        self._rank = comm.rank if comm is not None else 0
        self._ranks = comm.size if comm is not None else 1
        self._labels = labels
        if labels is not None:
            _checks.array(labels, "labels")
        self._epoch = 0
        self._active = None
        self._check_agreement(comm)

    # ---- the settings every rank must share --------------------------------------------------

    def _settings(self):
        """The settings that decide the batches, as (name, value) pairs."""
        return [("loader", type(self).__name__),
                ("seeds", f"{len(self._seeds)} seeds, sha256 "
                          f"{hashlib.sha256(self._seeds.tobytes()).hexdigest()[:16]}"),
                ("batch_size", self._batch_size), ("shuffle", self._shuffle),
                ("drop_last", self._drop_last), ("seed", self._seed)]

    def _check_agreement(self, comm):
        """MismatchError on every rank when a rank's settings differ from rank 0's."""
        if self._ranks == 1:
            return
        mine = self._settings()
        everyone = [json.loads(b) for b in comm.allgather_bytes(json.dumps(mine).encode())]
        for rank, theirs in enumerate(everyone[1:], start=1):
            for (name, first), (_, value) in zip(everyone[0], theirs):
                if first != value:
                    raise _core.MismatchError(
                        f"{type(self).__name__}: every rank must pass the same {name}: rank 0 "
                        f"has {first}, rank {rank} {value}")

    # ---- the plan of an epoch ------------------------------------------------------------------

    def __len__(self):
        """Batches per epoch, the same on every rank."""
        n, ranks, size = len(self._seeds), self._ranks, self._batch_size
        if self._drop_last:
            return (n // ranks) // size
        return _ceil_div(_ceil_div(n, ranks), size)

    @property
    def epoch(self):
        """The epoch the next pass over the loader runs."""
        return self._epoch

    def set_epoch(self, epoch):
        """Makes the next pass run ``epoch`` (later passes count on from it)."""
        self._epoch = _non_negative(epoch, "epoch")

    def _plan(self, epoch):
        """[(seeds, num_padded)] of this rank's batches in ``epoch``."""
        n, ranks, size = len(self._seeds), self._ranks, self._batch_size
        order = (np.random.default_rng([self._seed, epoch]).permutation(n) if self._shuffle
                 else np.arange(n))
        if self._drop_last:
            share = n // ranks
            mine = order[self._rank * share:(self._rank + 1) * share]
            count = share // size
            return [(self._seeds[mine[i * size:(i + 1) * size]], 0) for i in range(count)]
        share = _ceil_div(n, ranks)
        positions = np.arange(self._rank * share, (self._rank + 1) * share)
        mine = order[positions % n] if n else order[:0]
        padded = positions >= n
        plan = []
        for i in range(len(self)):
            part = slice(i * size, (i + 1) * size)
            plan.append((self._seeds[mine[part]], int(padded[part].sum())))
        return plan

    # ---- passes ----------------------------------------------------------------------------

    def __iter__(self):
        """A pass over the next epoch: waits for the previous pass's batch in preparation."""
        self.close()
        epoch, self._epoch = self._epoch, self._epoch + 1
        self._active = _Pass(self, epoch)
        return self._active

    def close(self):
        """Ends the current pass, after the batch it was preparing (if any)."""
        if self._active is not None:
            active, self._active = self._active, None
            active.close()

    #: Whether batches are made on a worker thread (NeighborLoader's prefetch).
    prefetching = False

    def _take_labels(self, seeds):
        """labels[seeds] for numpy ``seeds``, in the labels' framework and device."""
        if self._labels is None:
            return None
        kind = _arrays.framework(self._labels)
        if kind == "torch":
            return self._labels[sys.modules["torch"].from_numpy(seeds).to(self._labels.device)]
        if kind == "cupy":
            cupy = sys.modules["cupy"]
            with self._labels.device:
                return self._labels[cupy.asarray(seeds)]
        return np.asarray(self._labels)[seeds]

    def _make_batch(self, seeds, num_padded, epoch, index):
        return Batch(seeds=seeds, labels=self._take_labels(seeds), num_padded=num_padded,
                     epoch=epoch, index=index)

    def __repr__(self):
        return (f"{type(self).__name__}({len(self._seeds)} seeds, batch_size={self._batch_size}, "
                f"{len(self)} batches per epoch on each of {self._ranks} rank(s))")


class NeighborLoader(NodeLoader):
    """Mini-batches of seeds with their sampled neighborhoods (``fanouts`` per hop, -1: every
    neighbor; ``method`` one of graph.SAMPLE_METHODS) and, with ``features``, the features of the
    nodes the first layer reads.  ``graph`` is a Graph (load_graph, make_graph); ``labels`` an
    array indexed by node id (``HostGraph.node_labels``: the graph in WholeMemory keeps none).
    ``device``: "cpu" (the CPU sampler, host graphs), "cuda" (the GPU sampler on the current
    device), or None: "cuda" for a device-located graph, else "cpu".  Shares, shuffle, batch
    counts, random seeds and prefetch as in the module's docstring.  ``comm``: the ranks that
    share the seeds (None: this process takes them all); pass it for a graph in distributed
    memory, whose ranks must run the same batches.  Collective when ``comm`` has several ranks
    (the ranks agree on the seeds and settings)."""

    def __init__(self, graph, seeds, fanouts, batch_size, *, shuffle=True, drop_last=False,
                 comm=None, seed=0, method="uniform", features=True, prefetch=True, labels=None,
                 device=None):
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a Graph (from load_graph or make_graph), not "
                            f"{type(graph).__name__}")
        self._graph = graph
        self._fanouts = _fanouts(fanouts)
        if not self._fanouts:
            raise ValueError("fanouts must name at least one hop")
        self._method = _checks.text(method, "method")  # the library checks the name
        self._features = bool(features)
        if self._features and not graph.has_features:
            raise ValueError("this graph has no node features: pass features=False")
        if prefetch not in (True, False, "always"):
            raise ValueError(f"prefetch must be True, False or 'always', not {prefetch!r}")
        if device is None:
            device = "cuda" if graph.location == "device" else "cpu"
        if device not in ("cpu", "cuda"):
            raise ValueError(f"device must be 'cpu', 'cuda' or None, not {device!r}")
        if device == "cpu" and graph.location == "device":
            raise ValueError("the CPU sampler cannot read a device-located graph: use "
                             "device='cuda' (or None)")
        self._cuda_device = _core.current_device() if device == "cuda" else None
        self._sampler = None
        if device == "cuda":
            self._sampler = GpuSampler(graph)
        super().__init__(seeds, batch_size, shuffle=shuffle, drop_last=drop_last, comm=comm,
                         seed=seed, labels=labels)
        self._collective = graph.type == "distributed"
        self.prefetching = prefetch == "always" or (prefetch is True and not self._collective)
        if len(self._seeds) and (self._seeds.min() < 0 or self._seeds.max() >= graph.num_nodes):
            bad = int(np.flatnonzero((self._seeds < 0) | (self._seeds >= graph.num_nodes))[0])
            raise _core.IndexOutOfRangeError(
                f"NeighborLoader: seed {int(self._seeds[bad])} at position {bad} is outside the "
                f"graph's {graph.num_nodes} nodes")

    def _settings(self):
        return super()._settings() + [("fanouts", self._fanouts), ("method", self._method),
                                      ("features", self._features)]

    def _device_seeds(self, seeds):
        """``seeds`` (numpy) on the GPU sampler's device: a torch tensor, else a CuPy array."""
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None and torch.cuda.is_available():
            return torch.from_numpy(seeds).to(f"cuda:{self._cuda_device}")
        try:
            import cupy
        except ImportError:
            raise RuntimeError("the GPU sampler needs seeds on the GPU: install torch (with CUDA) "
                               "or CuPy") from None
        with cupy.cuda.Device(self._cuda_device):
            return cupy.asarray(seeds)

    def _make_batch(self, seeds, num_padded, epoch, index):
        random_seed = batch_random_seed(self._seed, epoch, index)
        labels = self._take_labels(seeds)
        if self._sampler is None:
            blocks = self._graph.sample(seeds, self._fanouts, self._method, random_seed)
        else:
            # A worker thread has a CUDA device of its own: make it the loader's.
            _core.set_device(self._cuda_device)
            seeds = self._device_seeds(seeds)
            blocks = self._sampler.sample(seeds, self._fanouts, self._method, random_seed)
        x = self._graph.gather_features(blocks[-1].src_nodes) if self._features else None
        if self._sampler is not None:
            # Complete before the loop sees it, whichever stream the loop then uses.
            if _arrays.framework(seeds) == "torch":
                sys.modules["torch"].cuda.current_stream(seeds.device).synchronize()
            else:
                sys.modules["cupy"].cuda.get_current_stream().synchronize()
        return Batch(seeds=seeds, blocks=blocks, features=x, labels=labels,
                     num_padded=num_padded, epoch=epoch, index=index, random_seed=random_seed)
