/*
 * CUDA kernels of gather/scatter and the launchers that pick their shape.  Included only by
 * the .cu files under src/cuda/, each of which instantiates a few combinations.
 *
 * The same-dtype copy is the hot path.  It moves bytes in vectors of VecT (16, 8, 4, 2 or 1
 * bytes, the widest that every row start, row length and base address allow) and is shaped
 * by the row width W in vectors:
 *  - W <= 32: a group of G = next_pow2(W) lanes per row, 32 / G rows per warp, and each
 *    thread loads its vector of rows_in_flight consecutive list entries before storing any,
 *    so every thread has several independent loads in flight;
 *  - W > 32: a warp per row, 4 rows per warp at a time, 2 vectors per row per lane in flight.
 * Grid sized from the SM count and the occupancy, grid-stride, 64-bit indexing.  Conversions
 * take a simpler warp-per-row element kernel.  Row addresses go through PtrGen
 * (gather_rows.hpp): continuous memory is plain arithmetic, chunked memory one part lookup per
 * row.  An entry whose source or destination row is negative is skipped: scatter drops
 * all but the last of duplicate indices that way.
 */
#pragma once

#include "cuda/gather_launch.hpp"
#include "gather_rows.hpp"

#include <wholememory/convert.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/log.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace wholememory::detail {

constexpr int copy_block_threads = 256;
constexpr int rows_in_flight = 8;

// A chunked table's view is read for every row (part lookup); the block copies it into shared
// memory first so the lookups stay off global memory.  Plain generators pass through.
template <typename Gen>
struct block_local {
  __device__ static Gen bind(const Gen& gen, chunked_view*) { return gen; }
};
template <>
struct block_local<chunked_bytes> {
  __device__ static chunked_bytes bind(const chunked_bytes& gen, chunked_view* shared) {
    static_assert(sizeof(chunked_view) % sizeof(unsigned long long) == 0, "copied in words");
    constexpr int view_words = sizeof(chunked_view) / sizeof(unsigned long long);
    const auto* from = reinterpret_cast<const unsigned long long*>(gen.view());
    auto* to = reinterpret_cast<unsigned long long*>(shared);
    for (int w = threadIdx.x; w < view_words; w += blockDim.x) to[w] = from[w];
    return chunked_bytes(shared);
  }
};

template <typename VecT, typename SrcGen, typename DstGen, typename SrcIdx, typename DstIdx>
__global__ void __launch_bounds__(copy_block_threads)
    copy_rows_kernel(row_addresser<SrcGen> src, const SrcIdx* __restrict__ src_idx,
                     row_addresser<DstGen> dst, const DstIdx* __restrict__ dst_idx, std::int64_t n,
                     int vecs_per_row, int group_shift, const unsigned long long* skip_word) {
  if (skip_word != nullptr && *skip_word != ~0ull) return;  // the index check found a bad one
  __shared__ chunked_view views[2];
  const row_addresser<SrcGen> src_in = src;
  const row_addresser<DstGen> dst_in = dst;
  src = {block_local<SrcGen>::bind(src_in.gen, &views[0]), src_in.stride_bytes,
         src_in.col_offset_bytes};
  dst = {block_local<DstGen>::bind(dst_in.gen, &views[1]), dst_in.stride_bytes,
         dst_in.col_offset_bytes};
  __syncthreads();
  const int W = vecs_per_row;
  const std::int64_t tid = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t nthreads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  if (W <= 32) {
    const int lane = threadIdx.x & ((1 << group_shift) - 1);
    const std::int64_t groups = nthreads >> group_shift;
    const bool active = lane < W;
    for (std::int64_t r0 = (tid >> group_shift) * rows_in_flight; r0 < n;
         r0 += groups * rows_in_flight) {
      VecT v[rows_in_flight];
      VecT* d[rows_in_flight];
#pragma unroll
      for (int k = 0; k < rows_in_flight; ++k) {
        const std::int64_t i = r0 + k;
        d[k] = nullptr;
        if (active && i < n) {
          const std::int64_t sr = row_at(src_idx, i), dr = row_at(dst_idx, i);
          if (sr >= 0 && dr >= 0) {
            d[k] = reinterpret_cast<VecT*>(dst.row(dr));
            v[k] = reinterpret_cast<const VecT*>(src.row(sr))[lane];
          }
        }
      }
#pragma unroll
      for (int k = 0; k < rows_in_flight; ++k) {
        if (d[k] != nullptr) d[k][lane] = v[k];
      }
    }
  } else {
    constexpr int warp_rows = 4, vecs_per_lane = 2;
    const int lane = threadIdx.x & 31;
    const std::int64_t warps = nthreads >> 5;
    for (std::int64_t r0 = (tid >> 5) * warp_rows; r0 < n; r0 += warps * warp_rows) {
      const VecT* s[warp_rows];
      VecT* d[warp_rows];
#pragma unroll
      for (int k = 0; k < warp_rows; ++k) {
        const std::int64_t i = r0 + k;
        s[k] = nullptr;
        d[k] = nullptr;
        if (i < n) {
          const std::int64_t sr = row_at(src_idx, i), dr = row_at(dst_idx, i);
          if (sr >= 0 && dr >= 0) {
            s[k] = reinterpret_cast<const VecT*>(src.row(sr));
            d[k] = reinterpret_cast<VecT*>(dst.row(dr));
          }
        }
      }
      for (int vb = 0; vb < W; vb += 32 * vecs_per_lane) {
        VecT v[warp_rows][vecs_per_lane];
#pragma unroll
        for (int k = 0; k < warp_rows; ++k) {
#pragma unroll
          for (int j = 0; j < vecs_per_lane; ++j) {
            const int c = vb + lane + 32 * j;
            if (s[k] != nullptr && c < W) v[k][j] = s[k][c];
          }
        }
#pragma unroll
        for (int k = 0; k < warp_rows; ++k) {
#pragma unroll
          for (int j = 0; j < vecs_per_lane; ++j) {
            const int c = vb + lane + 32 * j;
            if (d[k] != nullptr && c < W) d[k][c] = v[k][j];
          }
        }
      }
    }
  }
}

/// Blocks of copy_block_threads that fill every SM of the current device with `kernel`:
/// measured once per (thread, device, kernel) and kept, so a launch costs no occupancy query.
int resident_blocks(const void* kernel, int (*query)(const void*));

/// Blocks for a kernel: enough for the work, at most what fills every SM.
template <typename Kernel>
int blocks_for(Kernel kernel, std::int64_t threads_needed) {
  const int full = resident_blocks(reinterpret_cast<const void*>(kernel), [](const void* k) {
    int per_sm = 0;
    WM_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, reinterpret_cast<Kernel>(const_cast<void*>(k)), copy_block_threads, 0));
    return per_sm;
  });
  const std::int64_t needed = (threads_needed + copy_block_threads - 1) / copy_block_threads;
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(full, needed)));
}

template <typename VecT, typename SrcGen, typename DstGen, typename SrcIdx, typename DstIdx>
void launch_copy_rows_vec(row_addresser<SrcGen> src, const SrcIdx* src_idx,
                          row_addresser<DstGen> dst, const DstIdx* dst_idx, std::int64_t n,
                          std::size_t row_bytes, const unsigned long long* skip_word,
                          cudaStream_t stream) {
  const int W = static_cast<int>(row_bytes / sizeof(VecT));
  int group_shift = 5;
  std::int64_t threads_needed = 0;
  if (W <= 32) {
    group_shift = 0;
    while ((1 << group_shift) < W) ++group_shift;
    threads_needed = ((n + rows_in_flight - 1) / rows_in_flight) << group_shift;
  } else {
    threads_needed = ((n + 3) / 4) * 32;
  }
  auto kernel = copy_rows_kernel<VecT, SrcGen, DstGen, SrcIdx, DstIdx>;
  const int blocks = blocks_for(kernel, threads_needed);
  kernel<<<blocks, copy_block_threads, 0, stream>>>(src, src_idx, dst, dst_idx, n, W, group_shift,
                                                    skip_word);
  WM_CUDA_CHECK_LAUNCH(stream);
}

/// Widest vector (16, 8, 4, 2, 1 bytes) dividing every value that shapes the addresses.
inline int vector_bytes(std::uintptr_t bits) {
  for (int v : {16, 8, 4, 2})
    if (bits % v == 0) return v;
  return 1;
}

template <typename SrcGen, typename DstGen, typename SrcIdx, typename DstIdx>
void launch_copy_rows(row_addresser<SrcGen> src, const SrcIdx* src_idx, row_addresser<DstGen> dst,
                      const DstIdx* dst_idx, std::int64_t n, std::size_t row_bytes,
                      std::uintptr_t address_bits, const unsigned long long* skip_word,
                      cudaStream_t stream) {
  if (n <= 0 || row_bytes == 0) return;
  // The kernel counts vectors of a row in an int.
  WM_EXPECTS(row_bytes <= static_cast<std::size_t>(INT32_MAX),
             "rows of " << row_bytes << " bytes exceed the 2 GiB a gather row may have");
  const std::uintptr_t bits = address_bits | row_bytes | src.stride_bytes | src.col_offset_bytes |
                              dst.stride_bytes | dst.col_offset_bytes;
  WM_LOG(log_level::debug, "row copy: " << n << " rows of " << row_bytes << " bytes in "
                                        << vector_bytes(bits) << "-byte vectors (address bits 0x"
                                        << std::hex << (bits & 0xff) << std::dec << ")");
  switch (vector_bytes(bits)) {
    case 16:
      launch_copy_rows_vec<uint4>(src, src_idx, dst, dst_idx, n, row_bytes, skip_word, stream);
      break;
    case 8:
      launch_copy_rows_vec<uint2>(src, src_idx, dst, dst_idx, n, row_bytes, skip_word, stream);
      break;
    case 4:
      launch_copy_rows_vec<unsigned>(src, src_idx, dst, dst_idx, n, row_bytes, skip_word, stream);
      break;
    case 2:
      launch_copy_rows_vec<unsigned short>(src, src_idx, dst, dst_idx, n, row_bytes, skip_word,
                                           stream);
      break;
    default:
      launch_copy_rows_vec<unsigned char>(src, src_idx, dst, dst_idx, n, row_bytes, skip_word,
                                          stream);
      break;
  }
}

inline row_addresser<plain_bytes> plain_rows(const rows_ref& r) {
  return row_addresser<plain_bytes>{plain_bytes(r.base), r.stride_bytes, r.col_offset_bytes};
}

inline row_addresser<chunked_bytes> chunked_rows(const rows_ref& r) {
  return row_addresser<chunked_bytes>{chunked_bytes(r.view), r.stride_bytes, r.col_offset_bytes};
}

template <typename IndexT>
void launch_gather_rows_impl(const rows_ref& table, const IndexT* idx, const rows_ref& out,
                             const std::int64_t* out_pos, std::size_t n, std::size_t row_bytes,
                             cudaStream_t stream) {
  const std::uintptr_t bits = table.address_bits | out.address_bits;
  const auto sn = static_cast<std::int64_t>(n);
  if (table.view != nullptr) {
    launch_copy_rows(chunked_rows(table), idx, plain_rows(out), out_pos, sn, row_bytes, bits,
                     table.skip_word, stream);
  } else {
    launch_copy_rows(plain_rows(table), idx, plain_rows(out), out_pos, sn, row_bytes, bits,
                     table.skip_word, stream);
  }
}

template <typename IndexT>
void launch_scatter_rows_impl(const rows_ref& in, const std::int64_t* in_pos, const rows_ref& table,
                              const IndexT* idx, std::size_t n, std::size_t row_bytes,
                              cudaStream_t stream) {
  const std::uintptr_t bits = table.address_bits | in.address_bits;
  const auto sn = static_cast<std::int64_t>(n);
  if (table.view != nullptr) {
    launch_copy_rows(plain_rows(in), in_pos, chunked_rows(table), idx, sn, row_bytes, bits,
                     table.skip_word, stream);
  } else {
    launch_copy_rows(plain_rows(in), in_pos, plain_rows(table), idx, sn, row_bytes, bits,
                     table.skip_word, stream);
  }
}

// ---- converting copies ----------------------------------------------------------------------

struct device_rows {
  const chunked_view* view;
  char* base;
  std::size_t stride_bytes;
  std::size_t col_offset_bytes;

  __device__ __forceinline__ char* row(std::int64_t r) const {
    const std::size_t off = static_cast<std::size_t>(r) * stride_bytes + col_offset_bytes;
    return view != nullptr ? static_cast<char*>(view->byte_ptr(off)) : base + off;
  }
};

struct device_index {
  const void* data;
  bool is64;

  __device__ __forceinline__ std::int64_t at(std::int64_t i) const {
    if (data == nullptr) return i;
    return is64 ? static_cast<const std::int64_t*>(data)[i]
                : static_cast<std::int64_t>(static_cast<const std::int32_t*>(data)[i]);
  }
};

/// Warp per row, lanes over columns; converts Src to Dst.
template <typename Src, typename Dst>
__global__ void __launch_bounds__(copy_block_threads)
    convert_rows_kernel(device_rows src, device_index src_idx, device_rows dst,
                        device_index dst_idx, std::int64_t n, std::int64_t cols,
                        const unsigned long long* skip_word) {
  if (skip_word != nullptr && *skip_word != ~0ull) return;  // the index check found a bad one
  const int lane = threadIdx.x & 31;
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (std::int64_t i = warp; i < n; i += warps) {
    const std::int64_t sr = src_idx.at(i), dr = dst_idx.at(i);
    if (sr < 0 || dr < 0) continue;  // an entry dropped as a duplicate
    const Src* s = reinterpret_cast<const Src*>(src.row(sr));
    Dst* d = reinterpret_cast<Dst*>(dst.row(dr));
    for (std::int64_t c = lane; c < cols; c += 32) d[c] = convert_element<Dst>(s[c]);
  }
}

template <typename Src, typename Dst>
void launch_convert_rows_typed(const rows_ref& src, index_ref src_idx, const rows_ref& dst,
                               index_ref dst_idx, std::size_t n, std::size_t cols,
                               cudaStream_t stream) {
  if (n == 0 || cols == 0) return;
  device_rows s{src.view, src.base, src.stride_bytes, src.col_offset_bytes};
  device_rows d{dst.view, dst.base, dst.stride_bytes, dst.col_offset_bytes};
  device_index si{src_idx.data, src_idx.is64};
  device_index di{dst_idx.data, dst_idx.is64};
  auto kernel = convert_rows_kernel<Src, Dst>;
  const int blocks = blocks_for(kernel, static_cast<std::int64_t>(n) * 32);
  kernel<<<blocks, copy_block_threads, 0, stream>>>(
      s, si, d, di, static_cast<std::int64_t>(n), static_cast<std::int64_t>(cols),
      src.skip_word != nullptr ? src.skip_word : dst.skip_word);
  WM_CUDA_CHECK_LAUNCH(stream);
}

}  // namespace wholememory::detail
