/*
 * Private to the GPU path of gather/scatter (gather_device.cu: index check, duplicates, the
 * continuous and chunked path and the entry points; gather_exchange.cu: the distributed
 * exchange over NCCL): stream-ordered scratch, the side stream, the index-check kernels and
 * the copies of table-like rows by entry.  Templates that both files instantiate are defined
 * here; the others are compiled once, for int32 and int64 indices (extern template below).
 */
#pragma once

#include "cuda/gather_launch.hpp"
#include "gather_common.hpp"

#include <wholememory/cuda_check.hpp>
#include <wholememory/cuda_stream.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace wholememory::detail {

constexpr int block_threads = 256;

/// Stream-ordered scratch memory (cudaMallocAsync), freed on the same stream.
class stream_buffer {
 public:
  stream_buffer(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) WM_CUDA_TRY(cudaMallocAsync(&ptr_, bytes, stream));
  }
  stream_buffer(const stream_buffer&) = delete;
  stream_buffer& operator=(const stream_buffer&) = delete;
  ~stream_buffer() {
    if (ptr_ != nullptr) WM_CUDA_WARN(cudaFreeAsync(ptr_, stream_));
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

/// Pinned host memory (cudaHostAlloc with `flags`), owned: move-only, freed on destruction
/// (never throws).  For the host words the GPU path keeps per thread.
class pinned_host {
 public:
  pinned_host() = default;
  pinned_host(std::size_t bytes, unsigned flags) {
    WM_CUDA_TRY(cudaHostAlloc(&ptr_, bytes, flags));
  }
  pinned_host(pinned_host&& other) noexcept : ptr_(other.ptr_) { other.ptr_ = nullptr; }
  pinned_host& operator=(pinned_host&& other) noexcept {
    if (this != &other) {
      if (ptr_ != nullptr) WM_CUDA_WARN(cudaFreeHost(ptr_));
      ptr_ = other.ptr_;
      other.ptr_ = nullptr;
    }
    return *this;
  }
  pinned_host(const pinned_host&) = delete;
  pinned_host& operator=(const pinned_host&) = delete;
  ~pinned_host() {
    if (ptr_ != nullptr) WM_CUDA_WARN(cudaFreeHost(ptr_));
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

/// Side stream `which` (0, 1 or 2) of the current device for the calling thread, for work
/// that overlaps an exchange on the caller's stream.  Created on first use, destroyed when the
/// thread ends.
cudaStream_t side_stream(int which = 0);
/// Makes `waiter` wait for the work enqueued on `from` so far.
void stream_wait(cudaStream_t waiter, cudaStream_t from);
/// Blocks of block_threads for a grid-stride loop over n items on the current device.
int blocks_for_items(std::int64_t n);

// The index-check kernels, in each of the two files that launch them with internal linkage,
// as when they were one file.
namespace {

// result[0]: the smallest bad position (all ones when none).  Four loads in flight per thread
// (a thread's entries i, i + stride, ... in increasing order, so its first bad one is its
// smallest).
template <typename IndexT>
__device__ __forceinline__ void scan_for_bad_index(const IndexT* __restrict__ idx, std::int64_t n,
                                                   std::int64_t rows, unsigned long long* result) {
  constexpr int unroll = 4;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += unroll * stride) {
    std::int64_t v[unroll];
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      const std::int64_t j = i + k * stride;
      v[k] = j < n ? static_cast<std::int64_t>(idx[j]) : 0;
    }
#pragma unroll
    for (int k = 0; k < unroll; ++k) {
      if (v[k] < 0 || v[k] >= rows) {
        atomicMin(result, static_cast<unsigned long long>(i + k * stride));
        return;  // later entries of this thread come after this one
      }
    }
  }
}

template <typename IndexT>
__global__ void find_bad_index_kernel(const IndexT* __restrict__ idx, std::int64_t n,
                                      std::int64_t rows, unsigned long long* result) {
  scan_for_bad_index(idx, n, rows, result);
}

/// result[1] = the index at position result[0], when that names one (distributed memory).
template <typename IndexT>
__global__ void record_bad_value_kernel(const IndexT* idx, unsigned long long* result) {
  if (result[0] != ~0ull)
    result[1] = static_cast<unsigned long long>(static_cast<long long>(idx[result[0]]));
}

}  // namespace

/// Sorts (key, position) pairs by key (stable); positions start as 0..n-1.
template <typename KeyT>
void sort_by_key(const KeyT* keys, KeyT* keys_out, std::int64_t* positions_out, std::int64_t n,
                 std::uint64_t max_key, cudaStream_t stream);

rows_ref dense_rows(const dense_matrix& m, std::size_t stride_bytes);
rows_ref packed_rows(void* base, std::size_t row_bytes);
/// Whether a call visits host memory in address order (sorts its indices first).
bool sorts_host(const wm_tensor& t, std::size_t n, const gather_options& options);

/// Entry i copies table-like rows src[src_idx[i]] to dst[dst_pos[i]] (i when nullptr),
/// same-dtype or converting.  The gather shape: any index type on the source side.
template <typename SrcIdx>
void gather_entries(std::size_t cols, dtype src_type, const rows_ref& src, const SrcIdx* src_idx,
                    dtype dst_type, const rows_ref& dst, const std::int64_t* dst_pos, std::size_t n,
                    std::size_t src_row_bytes, cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  if (src_type == dst_type) {
    launch_gather_rows(src, src_idx, dst, dst_pos, n, src_row_bytes, stream);
    return;
  }
  launch_convert_rows(src_type, src, index_ref{src_idx, std::is_same<SrcIdx, std::int64_t>::value},
                      dst_type, dst, index_ref{dst_pos, true}, n, cols, stream);
}

/// Entry i copies src[src_pos[i]] (i when nullptr) to dst[dst_idx[i]].  The scatter shape.
template <typename DstIdx>
void place_entries(std::size_t cols, dtype src_type, const rows_ref& src,
                   const std::int64_t* src_pos, dtype dst_type, const rows_ref& dst,
                   const DstIdx* dst_idx, std::size_t n, std::size_t src_row_bytes,
                   cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  if (src_type == dst_type) {
    launch_scatter_rows(src, src_pos, dst, dst_idx, n, src_row_bytes, stream);
    return;
  }
  launch_convert_rows(src_type, src, index_ref{src_pos, true}, dst_type, dst,
                      index_ref{dst_idx, std::is_same<DstIdx, std::int64_t>::value}, n, cols,
                      stream);
}

/// Writes entry i of `src` (row src_pos[i], or i when nullptr) to `dst` row idx[i].  With
/// `sort_rows`, drops all but the last of duplicate indices: sorts by destination row, stable
/// (which also puts host-memory writes in address order).
template <typename IndexT>
void scatter_entries(std::size_t cols, dtype src_type, const rows_ref& src,
                     const std::int64_t* src_pos, dtype dst_type, const rows_ref& dst,
                     const IndexT* idx, std::size_t n, std::size_t dst_rows,
                     std::size_t src_row_bytes, bool sort_rows, cudaStream_t stream);

/// Gather from / scatter to distributed memory over NCCL (gather_exchange.cu).
template <typename IndexT>
void gather_distributed(const wm_tensor& table, const IndexT* idx, const dense_matrix& out,
                        const gather_geometry& g, const gather_options& options,
                        cudaStream_t stream);
template <typename IndexT>
void scatter_distributed(const dense_matrix& in, const IndexT* idx, const wm_tensor& table,
                         const gather_geometry& g, const gather_options& options,
                         cudaStream_t stream);

// In gather_device.cu.
extern template void sort_by_key<std::int32_t>(const std::int32_t*, std::int32_t*, std::int64_t*,
                                               std::int64_t, std::uint64_t, cudaStream_t);
extern template void sort_by_key<std::int64_t>(const std::int64_t*, std::int64_t*, std::int64_t*,
                                               std::int64_t, std::uint64_t, cudaStream_t);
extern template void scatter_entries<std::int32_t>(std::size_t, dtype, const rows_ref&,
                                                   const std::int64_t*, dtype, const rows_ref&,
                                                   const std::int32_t*, std::size_t, std::size_t,
                                                   std::size_t, bool, cudaStream_t);
extern template void scatter_entries<std::int64_t>(std::size_t, dtype, const rows_ref&,
                                                   const std::int64_t*, dtype, const rows_ref&,
                                                   const std::int64_t*, std::size_t, std::size_t,
                                                   std::size_t, bool, cudaStream_t);
// In gather_exchange.cu.
extern template void gather_distributed<std::int32_t>(const wm_tensor&, const std::int32_t*,
                                                      const dense_matrix&, const gather_geometry&,
                                                      const gather_options&, cudaStream_t);
extern template void gather_distributed<std::int64_t>(const wm_tensor&, const std::int64_t*,
                                                      const dense_matrix&, const gather_geometry&,
                                                      const gather_options&, cudaStream_t);
extern template void scatter_distributed<std::int32_t>(const dense_matrix&, const std::int32_t*,
                                                       const wm_tensor&, const gather_geometry&,
                                                       const gather_options&, cudaStream_t);
extern template void scatter_distributed<std::int64_t>(const dense_matrix&, const std::int64_t*,
                                                       const wm_tensor&, const gather_geometry&,
                                                       const gather_options&, cudaStream_t);

}  // namespace wholememory::detail
