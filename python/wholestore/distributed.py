"""nvmath-python's distributed utilities (initialization and symmetric memory) over wholestore's
symmetric heap: every rank of a job on one host holds a block of the same size, and every rank
addresses every block directly (peer GPUs over NVLink or PCIe, or shared host memory).

    import cupy, torch, wholestore.distributed as dist
    dist.initialize(device_id, comm)        # comm: a wholestore Communicator, or None (launch env)
    a = dist.allocate_symmetric_memory((3, 3), cupy, dtype=cupy.float32)
    b = dist.allocate_symmetric_memory((3, 3), torch, dtype=torch.float64)
    peer = dist.peer_view(b, 1)             # rank 1's block of b, as a torch tensor here
    dist.free_symmetric_memory(a, b)        # collective, same order on every rank

As in nvmath-python, allocation and freeing are collective (every rank, in the same order), the
buffer size must be the same on every rank unless ``make_symmetric=True`` (then every block gets
the largest size and each rank's array keeps its own shape), and memory must be freed with
free_symmetric_memory: the garbage collector cannot run a collective.  Sizes that differ without
make_symmetric raise MismatchError on every rank, naming each rank's size.  Beyond nvmath:
``numpy`` as the package gives arrays on a heap in shared host memory (no GPU needed), and
peer_view gives another rank's block.  An array must not be used after it is freed.
"""

import math
import sys
from dataclasses import dataclass

from . import _core

_context = None
_heaps = {}  # data address of an allocated array -> its SymmetricMemory


@dataclass(frozen=True)
class DistributedContext:
    """What initialize set up: the device (None: host arrays only) and the Communicator."""

    device_id: object
    communicator: object


def initialize(device_id, communicator=None):
    """Sets up symmetric memory for this process: ``device_id`` is the CUDA device its arrays
    live on (None: no GPU; numpy arrays only), ``communicator`` a wholestore Communicator (None:
    the job's, from the launch, torchrun or mpirun environment; wholestore.init).  Collective
    when it makes the communicator.  Raises RuntimeError when already initialized."""
    global _context
    if _context is not None:
        raise RuntimeError("wholestore.distributed is already initialized (call finalize first)")
    if device_id is not None:
        device_id = int(device_id)
        if not _core.cuda_built() or not 0 <= device_id < _core.device_count():
            raise ValueError(f"device_id {device_id} is not a visible CUDA device "
                             f"({_core.device_count()} visible)")
    if communicator is None:
        from .memory import init
        communicator = init(device=device_id)
    elif device_id is not None:
        _core.set_device(device_id)
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_available():
            torch.cuda.set_device(device_id)
    _context = DistributedContext(device_id, communicator)
    return _context


def get_context():
    """The DistributedContext of initialize, or None."""
    return _context


def finalize():
    """Forgets the context.  Raises RuntimeError while symmetric arrays are still allocated."""
    global _context
    if _heaps:
        raise RuntimeError(f"{len(_heaps)} symmetric array(s) are still allocated: free them "
                           "with free_symmetric_memory first")
    _context = None


def _require():
    if _context is None:
        raise RuntimeError("wholestore.distributed is not initialized: call initialize(device_id, "
                           "communicator) first")
    return _context


def _package_of(package, dtype):
    """(name, dtype, itemsize, location) for cupy, torch or numpy."""
    name = getattr(package, "__name__", "")
    if name == "torch":
        dtype = package.get_default_dtype() if dtype is None else dtype
        if not isinstance(dtype, package.dtype):
            raise ValueError(f"dtype {dtype!r} is not a torch.dtype")
        return name, dtype, package.empty((), dtype=dtype).element_size(), "device"
    if name in ("cupy", "numpy"):
        dtype = package.dtype(package.float64 if dtype is None else dtype)
        return name, dtype, dtype.itemsize, "device" if name == "cupy" else "host"
    raise ValueError(f"package {package!r} is not cupy, torch or numpy")


def _shape_of(shape):
    if isinstance(shape, int) or hasattr(shape, "__index__"):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError(f"shape {shape} has a negative extent")
    return shape


def _address(array):
    name = type(array).__module__.split(".")[0]
    if name == "torch":
        return array.data_ptr()
    if name == "cupy":
        return array.data.ptr
    return array.__array_interface__["data"][0]


def _wrap(raw, package, name, dtype, shape, axis_order):
    """The bytes `raw` as an array of `package` with `dtype`, `shape` and `axis_order`."""
    stored = shape if axis_order == "C" else shape[::-1]
    if name == "torch":
        a = package.from_dlpack(raw).view(dtype).reshape(stored)
        return a if axis_order == "C" else a.permute(*reversed(range(len(shape))))
    if name == "cupy":
        a = package.from_dlpack(raw).view(dtype).reshape(stored)
    else:
        a = package.asarray(raw).view(dtype).reshape(stored)
    return a if axis_order == "C" else a.T


def allocate_symmetric_memory(shape, package, *, dtype=None, axis_order="C",
                              make_symmetric=False, skip_symmetric_check=False, logger=None):
    """An uninitialized array of ``shape`` and ``dtype`` (default: the package's default) on the
    symmetric heap: a CuPy array or torch tensor on the initialized device, or a numpy array in
    shared host memory.  ``axis_order``: "C" (row-major) or "F".  Collective: every rank calls
    it, in the same order; sizes must match unless ``make_symmetric``.  The size check is a
    collective exchange the heap always makes, so ``skip_symmetric_check`` changes nothing;
    ``logger`` is accepted for nvmath's signature and not used."""
    ctx = _require()
    shape = _shape_of(shape)
    if axis_order not in ("C", "F"):
        raise ValueError(f"axis_order {axis_order!r} is not 'C' or 'F'")
    name, dtype, itemsize, location = _package_of(package, dtype)
    if location == "device" and ctx.device_id is None:
        raise ValueError(f"{name} arrays need a device: initialize with a device_id")
    nbytes = math.prod(shape) * itemsize
    heap = _core.SymmetricMemory(ctx.communicator, nbytes, location, bool(make_symmetric))
    try:
        array = _wrap(heap.view(ctx.communicator.rank, nbytes), package, name, dtype, shape,
                      axis_order)
    except BaseException:
        heap.free()
        raise
    _heaps[_address(array)] = (heap, nbytes)
    return array


def _heap_of(array, position=0):
    try:
        return _heaps[_address(array)]
    except (KeyError, AttributeError, TypeError):
        raise ValueError(f"array {position} was not allocated by allocate_symmetric_memory, or "
                         "was freed already") from None


def peer_view(array, rank):
    """Rank ``rank``'s block of a symmetric ``array``, with the array's shape, dtype and axis
    order, in the same package: zero-copy, readable and writable from this process (its own
    device's kernels for device memory).  Synchronize (a barrier after the writer's work has
    finished) before reading what another rank wrote."""
    heap, nbytes = _heap_of(array)
    name = type(array).__module__.split(".")[0]
    package = sys.modules[name]
    if name == "torch":
        shape, fortran = tuple(array.shape), not array.is_contiguous() and array.dim() > 1
    else:
        shape = tuple(array.shape)
        fortran = not array.flags.c_contiguous and len(shape) > 1
    return _wrap(heap.view(int(rank), nbytes), package, name, array.dtype, shape,
                 "F" if fortran else "C")


def free_symmetric_memory(*arrays):
    """Frees the arrays' blocks on every rank.  Collective: every rank passes its arrays in the
    same order.  Waits for the device's work before freeing device memory."""
    _require()
    heaps = [_heap_of(a, i)[0] for i, a in enumerate(arrays)]
    for a in arrays:
        name = type(a).__module__.split(".")[0]
        if name == "torch" and a.is_cuda:
            sys.modules["torch"].cuda.synchronize(a.device)
        elif name == "cupy":
            sys.modules["cupy"].cuda.Device(a.device.id).synchronize()
    for a, heap in zip(arrays, heaps):
        del _heaps[_address(a)]
        heap.free()
