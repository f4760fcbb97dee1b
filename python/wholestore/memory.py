"""Jobs and WholeMemory: joining the ranks of a job, and allocations spread over them.

A job is one process (no environment needed), several processes started by ``wholestore
launch``, torchrun or mpirun (their environment variables say rank, size and where rank 0
listens), or processes that name their rank, size and rank 0's address themselves (a TCP store
that rank 0 hosts).  ``init`` returns the job's Communicator; every collective call below is
made by every rank of it.
"""

import sys

import numpy as np

from . import _arrays, _checks, _core

TYPES = ("continuous", "chunked", "distributed")
LOCATIONS = ("device", "host")


def init(rank=None, size=None, master_addr=None, master_port=None, *, timeout=None,
         job_token="", device="auto"):
    """Joins the job and returns its host Communicator.  Collective.

    Without ``rank``/``size``: from the launch environment (RANK, WORLD_SIZE, LOCAL_RANK,
    MASTER_ADDR, MASTER_PORT as ``wholestore launch`` and torchrun set them, or mpirun's
    OMPI_COMM_WORLD_*), or a job of one rank when there is none.  With ``rank`` and ``size``:
    the ranks meet at a TCP store rank 0 hosts on ``master_addr:master_port`` (default
    $MASTER_ADDR / $WHOLESTORE_MASTER_PORT or $MASTER_PORT, else 127.0.0.1:29500).  Under
    torchrun, whose agent already serves torch.distributed's store on MASTER_PORT, the store
    takes MASTER_PORT + 1 unless WHOLESTORE_MASTER_PORT says otherwise.

    ``timeout``: seconds a collective waits for a missing peer (default $WHOLESTORE_TIMEOUT or
    300).  ``device``: the CUDA device this process uses for device memory and GPU calls:
    "auto" (the local rank modulo the visible GPUs, when there are any), an int, or None (leave
    the current device).  When torch is imported, its current device is set too.
    """
    timeout = None if timeout is None else _checks.number(timeout, "timeout")
    _checks.text(job_token, "job_token")
    if rank is None and size is None:
        if master_addr is not None or master_port is not None:
            raise ValueError("master_addr/master_port need rank and size")
        comm = _core.init_job(timeout)
    else:
        if rank is None or size is None:
            raise ValueError("pass both rank and size (or neither, to read the environment)")
        env_addr, env_port = _core.master_address()
        if master_addr is None:
            master_addr = env_addr
        if master_port is None:
            master_port = env_port
        comm = _core.init_tcp(_checks.integer(rank, "rank"), _checks.integer(size, "size"),
                              _checks.text(master_addr, "master_addr"),
                              _checks.integer(master_port, "master_port"), timeout, job_token)
    if device == "auto":
        device = comm.default_device() if _core.device_count() > 0 else None
    if device is not None:
        _core.set_device(int(device))
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.set_device(int(device))
    return comm


def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape must be an int or a tuple (rows, cols), not {type(shape).__name__}")
    shape = tuple(_checks.integer(s, "shape") for s in shape)
    if len(shape) not in (1, 2) or any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} must be (rows,) or (rows, cols) with sizes >= 0")
    return shape


class WholeMemory:
    """One WholeMemory allocation over the ranks of ``comm``, seen as a 1-D or 2-D array of one
    dtype whose rows never straddle two ranks' parts.  Collective to create and to free.

    ``type``: "continuous" (one range every rank maps), "chunked" (one part per rank, every
    part mapped by every local rank) or "distributed" (each rank maps its own part only).
    ``location``: "host" (shared host memory) or "device" (GPU memory of each rank's device).

    Views (``local_view``, ``part_view``, ``whole_view``) are zero-copy arrays over the memory:
    numpy arrays for host memory, DLPack-capable arrays for device memory (pass them to
    ``torch.from_dlpack`` or ``cupy.from_dlpack``).  They keep the allocation alive but must not
    be used after ``free()``.
    """

    def __init__(self, comm, shape, dtype="float32", type="continuous", location="host"):
        self._shape = _shape(shape)
        rows = self._shape[0]
        cols = self._shape[1] if len(self._shape) == 2 else 1
        self._m = _core.Memory(_checks.communicator(comm), rows, cols, _arrays.dtype_name(dtype),
                               _checks.text(type, "type"), _checks.text(location, "location"))

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._m.dtype

    @property
    def type(self):
        return self._m.type

    @property
    def location(self):
        return self._m.location

    @property
    def nbytes(self):
        return self._m.nbytes

    @property
    def num_parts(self):
        return self._m.num_parts

    def part(self, i):
        """Where part i lives: dict of offset, bytes, rank, device, mapped (in this process)."""
        return self._m.part(_checks.integer(i, "i"))

    def __len__(self):
        return self._shape[0]

    def __repr__(self):
        if not self._m.alive:
            return "WholeMemory(freed)"
        return (f"WholeMemory(shape={self._shape}, dtype={self.dtype}, type={self.type}, "
                f"location={self.location}, parts={self.num_parts})")

    @property
    def local_rows(self):
        """(begin, end): the rows of this rank's part."""
        first, view = self._m.view(-1, len(self._shape) == 1)
        return first, first + _arrays.length(view)

    def local_view(self):
        """A zero-copy view of this rank's rows."""
        return self._m.view(-1, len(self._shape) == 1)[1]

    def part_view(self, i):
        """(first row, zero-copy view) of part i (continuous or chunked memory: mapped here)."""
        return self._m.view(_checks.integer(i, "i"), len(self._shape) == 1)

    def whole_view(self):
        """A zero-copy view of every row (continuous memory only)."""
        return self._m.view(-2, len(self._shape) == 1)[1]

    def gather(self, indices, out=None, stream=None):
        """Rows ``indices`` (int32/int64, 1-D) into ``out`` (allocated like ``indices`` when
        None, with this memory's dtype; float dtypes convert).  Host memory with CPU arrays runs
        on CPU threads; otherwise on the GPU on ``stream`` (default: the current stream of the
        indices' framework).  Collective on distributed memory.  Returns ``out``."""
        given = out
        out = _arrays.adapt_output(out)
        indices = _arrays.as_indices(indices)
        if out is None:
            shape = (_arrays.length(indices),) + self._shape[1:]
            out = _arrays.empty(indices, shape, self.dtype)
        self._m.gather(indices, out, _arrays.stream_of(stream, indices, out))
        return out if given is None else given

    def scatter(self, values, indices, stream=None):
        """Writes the rows of ``values`` to rows ``indices`` (duplicates: the last wins).
        Paths and collectiveness as ``gather``."""
        indices = _arrays.as_indices(indices)
        values = _arrays.as_array(values, dtype=self.dtype, name="values")
        self._m.scatter(values, indices, _arrays.stream_of(stream, indices, values))

    def store(self, dir):
        """Writes the whole allocation to the store directory ``dir`` (each rank its own
        bytes; replaces an existing store atomically).  Collective."""
        self._m.store(_checks.path(dir))

    def load(self, dir, verify=True):
        """Reads a store of the same byte size into this allocation (any type, location or rank
        count may have written it).  Collective."""
        self._m.load(_checks.path(dir), bool(verify))

    def free(self):
        """Frees the allocation now, after the calls in flight on other threads (calls after it
        raise ValueError).  Collective."""
        self._m.free()

