"""Argument checks of the public wrappers.  Without them a wrong type reaches nanobind, whose
TypeError lists the C++ signature ("incompatible function arguments ... Invoked with types"),
or int() and float(), which take strings and truncate fractions silently.  Each check names
the argument and what it must be; each is an isinstance or two, cheap enough for every call.
Values (ranges, names of memory types, ...) are checked by the library, which names them."""

import numbers
import os

from . import _core


def _kind(value):
    return type(value).__name__


def communicator(value, name="comm"):
    """``value`` when it is a Communicator, else TypeError."""
    if not isinstance(value, _core.Communicator):
        raise TypeError(f"{name} must be a wholestore Communicator (from wholestore.init()), "
                        f"not {_kind(value)}")
    return value


def text(value, name):
    """``value`` when it is a str, else TypeError."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {_kind(value)}")
    return value


def optional_text(value, name):
    """None or a str."""
    return None if value is None else text(value, name)


def integer(value, name):
    """An int from an int, a numpy integer or a float without a fraction (1e6); TypeError for
    anything else (a string, a fractional float, None)."""
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(value)
    raise TypeError(f"{name} must be an integer, not {_kind(value)} {value!r}")


def number(value, name):
    """A float from an int, a float, a numpy number or a one-element array or tensor (anything
    with __float__); TypeError for anything else (a string, None, a bool)."""
    if isinstance(value, bool) or not (isinstance(value, numbers.Real)
                                       or hasattr(value, "__float__")):
        raise TypeError(f"{name} must be a number (int or float), not {_kind(value)}")
    return float(value)


def path(value, name="dir"):
    """A str path from a str or an os.PathLike."""
    try:
        return os.fspath(value)
    except TypeError:
        raise TypeError(f"{name} must be a path (str or os.PathLike), not {_kind(value)}") from None


def array(value, name):
    """``value`` when it may be an array (DLPack, the buffer protocol, numpy's or CUDA's array
    interface), else TypeError: None, strings, dicts and other objects that are not."""
    if (value is None or isinstance(value, (str, bytes, dict, set, frozenset))
            or not (hasattr(value, "__dlpack__") or hasattr(value, "__array_interface__")
                    or hasattr(value, "__array__") or hasattr(value, "__cuda_array_interface__")
                    or _has_buffer(value))):
        raise TypeError(f"{name} must be an array (numpy, torch, CuPy, ...) or a list, not "
                        f"{_kind(value)}")
    return value


def optional_array(value, name):
    """None or array(value, name)."""
    return None if value is None else array(value, name)


def _has_buffer(value):
    try:
        memoryview(value)
    except TypeError:
        return False
    return True
