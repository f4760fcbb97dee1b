/*
 * Gather and scatter of rows between WholeMemory and dense buffers.
 *
 * Embedding lookups and feature fetches are gathers; training updates are scatters.  A
 * wm_tensor is a 2-D view of a WholeMemory allocation (any type x location): row r, column c
 * is element r * row_stride + col_offset + c.  gather() copies the rows named by an index list
 * into a dense matrix, in index-list order; scatter() writes the rows of a dense matrix to the
 * rows named by the index list.  Element types convert during the copy among float32, float16,
 * bfloat16 and float64 (round to nearest even, NaN and Inf kept) and among int8, int16, int32
 * and int64 (static_cast: narrowing wraps modulo 2^bits).  Float <-> integer pairs are
 * rejected.
 *
 * Two paths, one element logic (convert.hpp; the row addressing in the library's sources):
 *  - gather / scatter: CUDA kernels on a stream.  The dense matrix and the indices live in
 *    device memory or in host memory the GPU can read (registered or managed).
 *  - gather_host / scatter_host: CPU threads, on host-location WholeMemory and host buffers.
 *
 * Distributed memory: every rank of the memory's communicator must call the same function
 * (collective; the index counts may differ per rank).  Indices are bucketed by owning rank,
 * sent to the owner through the communicator (NCCL for gather/scatter, the host backend for the
 * _host versions), rows are copied there and sent back, and placed in the caller's order.  On
 * one host the rows cross through receive buffers every rank maps, kept with the table until
 * it is freed and as large as its largest call's rows (gather always; gather_host and
 * scatter_host from 32 MiB a rank); WHOLESTORE_GATHER_PEER=0 keeps the communicator's exchange
 * and no buffers (docs/config.md).
 *
 * Indices are checked before any byte is written: an index < 0 or >= rows throws logic_error
 * naming the index, its position and the table size, and leaves the destination untouched.
 * With distributed memory every rank throws when any rank had a bad index.
 *
 * Duplicate indices in scatter: the destination row ends up equal to one of the rows written
 * to it: the last occurrence in the index list (distributed memory: the last in rank order,
 * ranks' lists concatenated).  The GPU path sorts the indices to get there; callers that know
 * their indices are unique can skip that (gather_options::unique_indices).
 */
#pragma once

#include <wholememory/allocation.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <thread>

namespace wholememory {

/// A 2-D tensor stored in WholeMemory.  Element (r, c) is element r * row_stride + col_offset
/// + c of the allocation (elements of `type`).  Rows must not straddle parts of chunked or
/// distributed memory: every part boundary inside the table is a multiple of the row stride
/// in bytes (pass row_stride * dtype_size(type), or a multiple of it, as the allocation
/// granularity).
struct wm_tensor {
  const allocation* memory = nullptr;
  dtype type = dtype::float32;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t row_stride = 0;  ///< elements between row starts, >= col_offset + cols
  std::size_t col_offset = 0;  ///< first column of the view inside each row
};

/// A dense row-major matrix in caller memory.  Row r starts at element r * row_stride.
struct dense_matrix {
  void* data = nullptr;
  dtype type = dtype::float32;
  std::size_t rows = 0;
  std::size_t cols = 0;
  std::size_t row_stride = 0;  ///< elements between row starts, >= cols
};

/// Row indices, int32 or int64.
struct index_array {
  const void* data = nullptr;
  dtype type = dtype::int64;
  std::size_t count = 0;
};

/// Tuning of the GPU path.
struct gather_options {
  /// Host-location memory: visit rows in address order (sort the indices, keep the positions)
  /// when there are at least this many indices.  Random reads of pinned host memory are bound
  /// by address translation; sorted ones reach the bus rate.  0 sorts always,
  /// SIZE_MAX never.  Device-location memory is never sorted for a gather.
  std::size_t sort_host_threshold = 65536;
  /// Scatter: the caller promises that no index appears twice in a call (over all ranks for
  /// distributed memory).  Skips the sort that makes duplicates resolve to one whole written
  /// row; with duplicates anyway, a row may end up mixing bytes of several written rows.
  bool unique_indices = false;
};

/// Threads the _host functions use by default.
inline unsigned default_host_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

/// Copies rows `indices` of `table` into `out` (out.rows == indices.count, out.cols ==
/// table.cols) on `stream`.  Continuous and chunked memory of either location; distributed
/// memory needs an NCCL communicator (collective over it).  Continuous and chunked memory: the
/// copy is enqueued behind the index check and skips itself on a bad index; the call then
/// waits for the check's 8-byte result only, so the copy may still run when it returns.
/// Distributed memory: the call waits once, for the exchanged counts (each rank's check
/// verdict travels with them; the bucketing by owner runs on a side stream meanwhile).  The
/// copies themselves are asynchronous.
/// Throws logic_error for bad shapes, dtype pairs, out-of-range indices (nothing written),
/// a build without CUDA, and a host communicator on distributed memory; cuda_error,
/// nccl_error.
void gather(const wm_tensor& table, const index_array& indices, const dense_matrix& out,
            cudaStream_t stream);
void gather(const wm_tensor& table, const index_array& indices, const dense_matrix& out,
            const gather_options& options, cudaStream_t stream);

/// Copies the rows of `in` (in.rows == indices.count) to rows `indices` of `table` on
/// `stream`.  Same memory, synchronization and errors as gather().
void scatter(const dense_matrix& in, const index_array& indices, const wm_tensor& table,
             cudaStream_t stream);
void scatter(const dense_matrix& in, const index_array& indices, const wm_tensor& table,
             const gather_options& options, cudaStream_t stream);

/// The row-copy kernel of gather() alone, for benchmarks that separate the kernel from the
/// per-call work around it (`wholestore bench` reports both).  Continuous or chunked memory of
/// either location, table.type == out.type.  Shapes and dtypes are checked as in gather(), but
/// the indices are not: an index outside [0, table.rows) is undefined behaviour.  No
/// host-memory sort, no scratch; enqueues on `stream` and returns without synchronizing.
/// Throws logic_error for bad shapes, a dtype conversion, distributed memory or a build
/// without CUDA; cuda_error when the launch fails.
void gather_unchecked_async(const wm_tensor& table, const index_array& indices,
                            const dense_matrix& out, cudaStream_t stream);

/// CPU path of gather(): host-location memory, host index and output buffers, `threads`
/// threads.  Distributed memory needs a host-backend communicator (collective over it).
/// Synchronous.  Throws logic_error for device-location memory and as gather().
void gather_host(const wm_tensor& table, const index_array& indices, const dense_matrix& out,
                 unsigned threads = default_host_threads());

/// CPU path of scatter(); see gather_host().
void scatter_host(const dense_matrix& in, const index_array& indices, const wm_tensor& table,
                  unsigned threads = default_host_threads());

}  // namespace wholememory
