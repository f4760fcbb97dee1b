"""Embedding tables: [rows, dim] float32/float16/bfloat16 matrices in WholeMemory, trained by
sparse optimizers whose float32 state lives beside them (docs/architecture.md, "Embedding
tables", gives the update rules and why every path gives the same bits).

Collective: creating and freeing a table, ``apply_gradients`` (every rank calls, with its own,
possibly empty, batch), checkpoints, and on distributed memory also ``lookup`` and
``write_rows``.

Threads: calls on one table (or cache) may run on several threads; ``free()`` waits for the
calls in flight and then frees, and calls that start after it raise ValueError.
"""

from . import _arrays, _checks, _core

OPTIMIZERS = tuple(_core.optimizer_names())


def _lookup(core, dim, table_dtype, indices, out, dtype, stream):
    """Rows `indices` of a table or cache (`core`) into `out`, allocated when None like
    `indices` ([n, dim], `dtype` or the table's); returns what the caller passed or allocated."""
    given = out
    out = _arrays.adapt_output(out)
    indices = _arrays.as_indices(indices)
    if out is None:
        out = _arrays.empty(indices, (_arrays.length(indices), dim),
                            _arrays.dtype_name(dtype) if dtype is not None else table_dtype)
    core.lookup(indices, out, _arrays.stream_of(stream, indices, out))
    return out if given is None else given


class EmbeddingTable:
    """A trainable embedding table over the ranks of ``comm``.

    ``init``: "uniform" over ``init_range``, "normal" (``init_mean``, ``init_std``) or "zeros";
    element (r, c) depends only on (seed, r, c), so the table is the same for any rank count,
    memory type and location.  ``optimizer``: one of OPTIMIZERS ("sgd", "adam", "adagrad",
    "rowwise_adagrad", "rmsprop") with its hyperparameters; the learning rate is given per
    ``apply_gradients`` call.
    """

    def __init__(self, comm, rows, dim, dtype="float32", type="continuous", location="host", *,
                 init="uniform", init_range=(-0.01, 0.01), init_mean=0.0, init_std=0.01,
                 seed=0, optimizer="sgd", weight_decay=0.0, beta1=0.9, beta2=0.999, eps=1e-8,
                 alpha=0.99, initial_accumulator=0.0):
        if not isinstance(init_range, (tuple, list)) or len(init_range) != 2:
            raise TypeError(f"init_range must be a pair (low, high), not {init_range!r}")
        n = _checks.number
        self._t = _core.Table(
            _checks.communicator(comm), _checks.integer(rows, "rows"),
            _checks.integer(dim, "dim"), _arrays.dtype_name(dtype), _checks.text(type, "type"),
            _checks.text(location, "location"), _checks.text(init, "init"),
            n(init_range[0], "init_range[0]"), n(init_range[1], "init_range[1]"),
            n(init_mean, "init_mean"), n(init_std, "init_std"), _checks.integer(seed, "seed"),
            _checks.text(optimizer, "optimizer"), n(weight_decay, "weight_decay"),
            n(beta1, "beta1"), n(beta2, "beta2"), n(eps, "eps"), n(alpha, "alpha"),
            n(initial_accumulator, "initial_accumulator"))
        self._comm = comm

    comm = property(lambda self: self._comm, doc="the Communicator the table is made over")
    rows = property(lambda self: self._t.rows)
    dim = property(lambda self: self._t.dim)
    dtype = property(lambda self: self._t.dtype)
    type = property(lambda self: self._t.type)
    location = property(lambda self: self._t.location)
    optimizer = property(lambda self: self._t.optimizer)
    state_names = property(lambda self: self._t.state_names)
    own_rows = property(lambda self: self._t.own_rows, doc="(begin, end): rows this rank owns")
    rank_rows = property(lambda self: self._t.rank_rows, doc="every rank's (begin, end)")

    @property
    def step(self):
        """apply_gradients calls so far (Adam's bias corrections use it)."""
        return self._t.step

    @step.setter
    def step(self, value):
        self._t.step = _checks.integer(value, "step")

    @property
    def shape(self):
        return (self.rows, self.dim)

    def __repr__(self):
        if not self._t.alive:
            return "EmbeddingTable(freed)"
        return (f"EmbeddingTable(rows={self.rows}, dim={self.dim}, dtype={self.dtype}, "
                f"type={self.type}, location={self.location}, optimizer={self.optimizer}, "
                f"step={self.step})")

    def lookup(self, indices, out=None, dtype=None, stream=None):
        """Rows ``indices`` into ``out`` ([n, dim], any float dtype; allocated like ``indices``
        with ``dtype`` or the table's when None).  A host table with CPU arrays runs on CPU
        threads, anything else on the GPU on ``stream`` (default: the current stream of the
        indices' framework).  An index outside [0, rows) raises LogicError naming it, ``out``
        untouched.  Returns ``out``."""
        return _lookup(self._t, self.dim, self.dtype, indices, out, dtype, stream)

    read_rows = lookup

    def write_rows(self, indices, rows, stream=None):
        """Raw writes of rows (duplicates: the last wins); the optimizer state and the step stay
        as they are."""
        indices = _arrays.as_indices(indices)
        rows = _arrays.as_array(rows, dtype="float32", name="rows")
        self._t.write_rows(indices, rows, _arrays.stream_of(stream, indices, rows))

    def apply_gradients(self, indices, grads, lr, stream=None):
        """One optimizer step on rows ``indices`` with ``grads`` ([n, dim], float32, float16 or
        bfloat16); gradients of repeated indices are summed.  Collective: every rank calls, with
        its own batch (empty allowed).  Any bad index on any rank raises on every rank with
        nothing changed.  ``lr`` must be positive and finite (ValueError otherwise).  On the CPU
        path (a host table, CPU arrays) gradients holding NaN or infinity raise ValueError on
        every rank, nothing changed; gradients in GPU memory are not checked (that would cost a
        reduction and a wait on every step).  On the GPU path the update stays enqueued on
        ``stream``: keep the inputs alive until the stream has passed it."""
        indices = _arrays.as_indices(indices)
        grads = _arrays.as_array(grads, dtype="float32", name="grads")
        self._t.apply_gradients(indices, grads, _checks.number(lr, "lr"),
                                _arrays.stream_of(stream, indices, grads))

    def read_state(self, name, indices, out=None, stream=None):
        """Rows ``indices`` of the optimizer state ``name`` (float32; see ``state_names``)."""
        _checks.text(name, "name")
        given = out
        out = _arrays.adapt_output(out)
        indices = _arrays.as_indices(indices)
        if out is None:
            cols = self._t.state_cols(name)
            out = _arrays.empty(indices, (_arrays.length(indices), cols), "float32")
        self._t.read_state(name, indices, out, _arrays.stream_of(stream, indices, out))
        return out if given is None else given

    def local_weights(self):
        """(first row, zero-copy view of this rank's rows of the weights)."""
        return self._t.local_weights()

    def store_checkpoint(self, dir):
        """Weights, optimizer state and step into the store directory ``dir`` (replaced
        atomically).  Collective; finish GPU work on the table first."""
        self._t.store_checkpoint(_checks.path(dir))

    def load_checkpoint(self, dir):
        """Loads a checkpoint of a table of the same rows, dim, dtype and optimizer (any rank
        count, type or location may have stored it).  Collective."""
        self._t.load_checkpoint(_checks.path(dir))

    def free(self):
        """Frees weights and state now.  Calls in flight on other threads finish first (free
        waits for them); calls after it raise ValueError.  Collective."""
        self._t.free()



def hottest_rows(sample, rows, capacity):
    """The ``capacity`` rows that appear most often in ``sample`` (a CPU array of indices into a
    table of ``rows`` rows; ties go to the lower row), at most the sample's distinct rows: the
    cache's static policy (docs/architecture.md, "Embedding cache").  An int64 numpy array."""
    import numpy as np
    sample = _arrays.as_indices(sample, "sample")
    return np.asarray(_core.hottest_rows(sample, _checks.integer(rows, "rows"),
                                         _checks.integer(capacity, "capacity")), dtype=np.int64)


class DeviceCache:
    """A GPU's copy of the hot rows of a continuous or chunked ``EmbeddingTable`` whose weights
    live in host memory (or on another GPU).  Lookups through the cache give exactly the bytes
    the table's lookup gives, cached or not; ``apply_gradients`` and ``write_rows`` through it
    update the table (write-through) and the cached copies, so neither is ever stale and a
    checkpoint needs no flush.  ``flush()`` re-reads the cached rows after the table changed
    some other way (another rank's cache, ``load_checkpoint``, the table's own calls).

    ``rows``: the row ids to cache (a CPU array; distinct), e.g. ``hottest_rows(sample, ...)``,
    or pass ``fraction`` and ``sample`` to choose the ``fraction * table.rows`` rows most frequent
    in ``sample``.  ``device``: the CUDA device (default: the current one).  GPU only: inputs and
    outputs in memory the GPU reads.  ``apply_gradients`` is collective, like the table's.
    The cache keeps its table alive.  ``stats()`` gives (lookups, hits) since the last
    ``reset_stats()``.
    """

    def __init__(self, table, rows=None, *, fraction=None, sample=None, device=None):
        if not isinstance(table, EmbeddingTable):
            raise TypeError(f"table must be an EmbeddingTable, not {type(table).__name__}")
        if (rows is None) == (fraction is None):
            raise ValueError("pass either rows or fraction (with sample)")
        if rows is None:
            if sample is None:
                raise ValueError("fraction needs a sample of the index stream to rank rows by")
            if not 0.0 < _checks.number(fraction, "fraction") <= 1.0:
                raise ValueError(f"fraction {fraction} is not in (0, 1]")
            rows = hottest_rows(sample, table.rows, max(1, int(float(fraction) * table.rows)))
        self.table = table
        device = _core.current_device() if device is None else _checks.integer(device, "device")
        self._c = _core.DeviceCache(table._t, _arrays.as_indices(rows, "rows"), device)

    rows = property(lambda self: self.table.rows)
    dim = property(lambda self: self.table.dim)
    dtype = property(lambda self: self.table.dtype)
    capacity = property(lambda self: self._c.capacity, doc="rows held in device memory")
    device = property(lambda self: self._c.device)

    def __repr__(self):
        return f"DeviceCache(capacity={self.capacity}, device={self.device}, table={self.table!r})"

    def lookup(self, indices, out=None, dtype=None, stream=None):
        """As ``EmbeddingTable.lookup``, hits served from device memory.  Returns ``out``."""
        return _lookup(self._c, self.dim, self.dtype, indices, out, dtype, stream)

    def apply_gradients(self, indices, grads, lr, stream=None):
        """``EmbeddingTable.apply_gradients`` through the cache (collective; GPU arrays, whose
        gradients are not checked for NaN)."""
        indices = _arrays.as_indices(indices)
        grads = _arrays.as_array(grads, dtype="float32", name="grads")
        self._c.apply_gradients(indices, grads, _checks.number(lr, "lr"),
                                _arrays.stream_of(stream, indices, grads))

    def write_rows(self, indices, rows, stream=None):
        """``EmbeddingTable.write_rows`` through the cache (not collective)."""
        indices = _arrays.as_indices(indices)
        rows = _arrays.as_array(rows, dtype="float32", name="rows")
        self._c.write_rows(indices, rows, _arrays.stream_of(stream, indices, rows))

    def flush(self, stream=None):
        """Re-reads every cached row from the table."""
        self._c.flush(_arrays.stream_of(stream))

    def stats(self, stream=None):
        """(lookups, hits) since the cache was made or ``reset_stats``; synchronizes."""
        return self._c.stats(_arrays.stream_of(stream))

    def reset_stats(self, stream=None):
        self._c.reset_stats(_arrays.stream_of(stream))

    def free(self):
        """Frees the device copy now, after the calls in flight on other threads."""
        self._c.free()
