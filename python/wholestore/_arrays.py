"""Array plumbing shared by the modules: dtype names, streams, and outputs allocated by the
caller's framework (numpy, torch or CuPy, whichever the inputs come from).

Nothing here imports torch or CuPy: a framework is used only when the caller's arrays already
come from it (so it is imported already)."""

import sys

import numpy as np

from . import _checks, _core

_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
           "float64")


def dtype_name(dtype):
    """The library's name of a dtype given as a name, a numpy dtype or type, or a torch dtype."""
    if isinstance(dtype, str):
        name = dtype[len("torch."):] if dtype.startswith("torch.") else dtype
    elif type(dtype).__module__.startswith("torch"):
        name = str(dtype)[len("torch."):]
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            raise ValueError(f"unknown dtype {dtype!r}; accepted: {', '.join(_DTYPES)}") from None
    aliases = {"float": "float32", "double": "float64", "half": "float16", "long": "int64",
               "int": "int32", "short": "int16"}
    name = aliases.get(name, name)
    if name not in _DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(_DTYPES)}")
    return name


def framework(x):
    """'numpy', 'torch', 'cupy', 'jax' or 'other'."""
    module = type(x).__module__
    if module.startswith("torch"):
        return "torch"
    if module.startswith("cupy"):
        return "cupy"
    if module.startswith("jax"):
        return "jax"
    if isinstance(x, np.ndarray):
        return "numpy"
    return "other"


def on_gpu(x):
    """True when x is a CUDA array (DLPack device CUDA or managed)."""
    device = getattr(x, "__dlpack_device__", None)
    if device is None:
        return False
    return device()[0] in (2, 13)


class _InterfaceView:
    """A DLPack-capable view of an object that offers only ``__cuda_array_interface__``, with
    its shape; keeps the object alive."""

    def __init__(self, obj):
        self._view = _core.cuda_array_view(obj)
        self.shape = tuple(int(n) for n in obj.__cuda_array_interface__["shape"])
        self.source = obj

    def __dlpack__(self, *args, **kwargs):
        return self._view.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._view.__dlpack_device__()


def adapt(x):
    """An object that exposes only ``__cuda_array_interface__`` (Numba device arrays, older
    CuPy, ...) as a DLPack-capable view of the same memory (its stream waited for, v3); other
    objects pass unchanged."""
    if x is None or hasattr(x, "__dlpack__") or not hasattr(x, "__cuda_array_interface__"):
        return x
    return _InterfaceView(x)


def adapt_output(x, name="out"):
    """adapt() for an array the call writes (None passes): a read-only
    ``__cuda_array_interface__`` is refused, something that is no array is a TypeError naming
    ``name``."""
    if x is not None and not hasattr(x, "__dlpack__"):
        iface = getattr(x, "__cuda_array_interface__", None)
        if isinstance(iface, dict) and len(iface.get("data", ())) == 2 and iface["data"][1]:
            raise ValueError(f"{name} is read-only (its __cuda_array_interface__ says so)")
    return _checks.optional_array(adapt(x), name)


def as_indices(indices, name="indices"):
    """Indices as an array: lists, tuples, ranges and integer scalars become int64 numpy arrays
    (other values, such as floats, which int64 would truncate, are a TypeError naming
    ``name``); arrays pass."""
    if isinstance(indices, (str, bytes)):
        raise TypeError(f"{name} must be integers (an array, a list or an int), not "
                        f"{type(indices).__name__}")
    if isinstance(indices, (list, tuple, range)) or np.isscalar(indices):
        values = np.asarray(indices)
        if values.size and values.dtype.kind not in "iu":
            raise TypeError(f"{name} must be integers, not {values.dtype.name} values")
        return values.astype(np.int64, copy=False).reshape(-1)
    return _checks.array(adapt(indices), name)


def as_array(values, dtype=None, name="values"):
    """Values as an array: lists and tuples become numpy arrays; arrays pass; anything else is a
    TypeError naming ``name``."""
    if isinstance(values, (list, tuple)):
        return np.asarray(values, dtype=dtype)
    return _checks.array(adapt(values), name)


def length(array):
    """Rows of an array (its first dimension)."""
    shape = getattr(array, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else 1
    return len(array)


def stream_of(stream, *arrays):
    """The CUDA stream of a call as an integer.  `stream` may be an int, a torch.cuda.Stream
    (its cuda_stream), a CuPy stream (its ptr) or None: then the current stream of the framework
    that holds the first CUDA array among `arrays` (so the call is ordered after the work that
    produced them), else 0 (the legacy default stream)."""
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attribute in ("cuda_stream", "ptr"):
            value = getattr(stream, attribute, None)
            if value is not None:
                return int(value)
        raise ValueError(f"stream {stream!r} is not an int, a torch.cuda.Stream or a CuPy stream")
    for x in arrays:
        if x is None or not on_gpu(x):
            continue
        kind = framework(x)
        if kind == "torch":
            torch = sys.modules["torch"]
            return int(torch.cuda.current_stream(x.device).cuda_stream)
        if kind == "cupy":
            cupy = sys.modules["cupy"]
            return int(cupy.cuda.get_current_stream().ptr)
    return 0


def empty(like, shape, dtype):
    """An uninitialised array of `shape` and dtype name `dtype`, allocated by the framework and
    on the device of `like` (numpy for CPU arrays of other frameworks)."""
    kind = framework(like)
    if kind == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=getattr(torch, dtype), device=like.device)
    if kind == "cupy":
        cupy = sys.modules["cupy"]
        with like.device:
            return cupy.empty(shape, dtype=dtype)
    if on_gpu(like):
        raise ValueError(f"cannot allocate an output on the GPU for a {type(like).__name__}; "
                         "pass out= (a torch tensor or a CuPy array)")
    if dtype == "bfloat16":
        try:
            import ml_dtypes  # numpy has no bfloat16 of its own
            return np.empty(shape, dtype=ml_dtypes.bfloat16)
        except ImportError:
            raise ValueError("numpy has no bfloat16: pass dtype='float32' or out=") from None
    return np.empty(shape, dtype=dtype)
