/*
 * Arrays across the Python boundary: DLPack tensors (numpy, torch, CuPy, JAX, anything with
 * __dlpack__ or the buffer protocol, through nanobind's ndarray) become the library's
 * index_array / dense_matrix, and library memory goes back out as DLPack-capable arrays whose
 * owner keeps the memory alive.
 *
 * Checks here throw nb::value_error (Python ValueError) naming the argument, what it is and what
 * was expected: the library would refuse the same inputs later, but the binding knows the
 * argument's Python name.
 */
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <wholememory/dtype.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::python {

namespace nb = nanobind;

/// An array the call only reads (read-only arrays accepted).
using in_array = nb::ndarray<nb::ro>;
/// An array the call writes.
using out_array = nb::ndarray<>;

/// The library dtype of a DLPack dtype; ValueError naming `what` for others.
wholememory::dtype to_dtype(nb::dlpack::dtype t, const char* what);
/// The DLPack dtype of a library dtype.
nb::dlpack::dtype to_dlpack(wholememory::dtype t);
/// Parses a dtype name ("float32", ...); ValueError naming the accepted names.
wholememory::dtype dtype_from_name(const std::string& name);

/// True when the array lives in memory a CUDA kernel reads: device, managed or pinned host
/// (DLPack kDLCUDA, kDLCUDAManaged, kDLCUDAHost).
bool gpu_reachable(int device_type);
/// True for plain CPU memory (kDLCPU) and pinned host memory (kDLCUDAHost): what the CPU paths
/// accept.
bool cpu_reachable(int device_type);

/// Before a GPU-path call: ValueError naming the first array that a kernel cannot read (plain
/// CPU memory), so that pageable memory never reaches a kernel.
void require_gpu_reachable(std::initializer_list<std::pair<const char*, int>> arrays,
                           const char* why);

/// A 1-D contiguous int32/int64 array as index_array.
wholememory::index_array as_indices(const in_array& a, const char* what);

/// A row-major matrix of `cols` columns: 2-D with unit column stride (a row stride >= cols is
/// kept), or 1-D when `cols` == 1 and `allow_1d`.  `rows` is checked when not SIZE_MAX.
wholememory::dense_matrix as_matrix(const in_array& a, std::size_t rows, std::size_t cols,
                                    bool allow_1d, const char* what);
wholememory::dense_matrix as_matrix(const out_array& a, std::size_t rows, std::size_t cols,
                                    bool allow_1d, const char* what);

/// A DLPack-capable view of an object exposing __cuda_array_interface__ (version 2 or 3): its
/// shape, typestr (one of the library's dtypes but bfloat16, which has no typestr), data
/// pointer and strides, which must be absent or C-contiguous.  A version-3 `stream` (an int
/// other than 0) is waited for before the view is returned, so the producer's work is done.
/// ValueError naming the key for a malformed interface.  The view keeps `obj` alive.
nb::object cuda_array_view(nb::handle obj);

/// A CUDA stream from its integer value (0: the legacy default stream).
inline cudaStream_t to_stream(std::uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

/// A view of `rows` x `cols` elements of `type` at `data`, owned by `owner` (kept alive while the
/// view lives): a numpy array for host memory (device -1), a DLPack-capable array for device
/// memory.  `one_dim`: shape (rows,) instead of (rows, cols) (cols must be 1).
nb::object make_view(void* data, std::size_t rows, std::size_t cols, wholememory::dtype type,
                     int device, bool one_dim, nb::handle owner);

/// A 1-D numpy array that takes over `vec`'s storage (moved; no copy).
template <typename T>
nb::object to_numpy(std::vector<T>&& vec) {
  auto* held = new std::vector<T>(std::move(vec));
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  const std::size_t shape[1] = {held->size()};
  return nb::cast(nb::ndarray<nb::numpy, T>(held->data(), 1, shape, owner),
                  nb::rv_policy::reference);
}

}  // namespace wholestore::python
