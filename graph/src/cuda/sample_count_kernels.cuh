/*
 * Counting kernels of the GPU sampler (sampling_counts.cu): start, degree and count of
 * positions of every dst node, the positive weights of weighted hops (a warp per node, whole
 * blocks for nodes above big_degree edges), the frontier's edge ids for gathering distributed
 * weights, and the once-per-graph degree and weight statistics.
 * Included by sampling_counts.cu only: it defines functions that are not templates.
 */
#pragma once

#include "sample_common.cuh"

#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>

#include <cstdint>

namespace wholestore::graph::gpu {

/// start, degree and count of every dst node (counts[i] = 0 for n_dst <= i <= bound, so that
/// the scan over bound + 1 items ends with the edge total).  With big_list (weighted hops on
/// graphs whose weights are all positive, where no counting pass runs): counts[i] is the
/// degree, the positive-weight count that pass would find, and nodes above big_degree edges
/// are listed.
/// A row outside [0, num_edges] is recorded in `fault` and taken as empty.
template <typename Ro>
__global__ void dst_info_kernel(const std::int64_t* dst, device_count n_dst, std::int64_t bound,
                                Ro ro, sample_method method, int fanout, std::int64_t* start,
                                std::int64_t* deg, std::int64_t* counts, std::int32_t* big_list,
                                unsigned long long* big_count, std::int64_t num_edges,
                                long long* fault) {
  const std::int64_t n = n_dst.get();
  for (std::int64_t i = thread_id(); i <= bound; i += thread_count()) {
    if (i >= n) {
      counts[i] = 0;
      continue;
    }
    const std::int64_t v = dst[i];
    std::int64_t s, e;
    ro(i, v, s, e);
    if (!row_in_bounds(s, e, num_edges)) {
      record_fault(fault, fault_row, v);
      s = 0;
      e = 0;
    }
    start[i] = s;
    deg[i] = e - s;
    if (big_list == nullptr) {
      counts[i] = d::max_sample_count(method, e - s, fanout);
      continue;
    }
    counts[i] = e - s;
    if (e - s > big_degree) big_list[atomicAdd(big_count, 1ull)] = static_cast<std::int32_t>(i);
  }
}

/// Index list for gathering row_offsets at v and v + 1 of every dst node.
__global__ void row_index_kernel(const std::int64_t* dst, std::int64_t n, std::int64_t* idx) {
  for (std::int64_t i = thread_id(); i < n; i += thread_count()) {
    idx[2 * i] = dst[i];
    idx[2 * i + 1] = dst[i] + 1;
  }
}

/// Weighted hops (fanout >= 0): npos[i] = the number of positive weights of dst node i.  A
/// warp per node; nodes above big_degree edges are listed for count_big_kernel instead (their
/// npos starts at 0 and collects its blocks' sums).
template <typename W>
__global__ void count_weighted_kernel(const std::int64_t* start, const std::int64_t* deg,
                                      device_count n_dst, W w, std::int64_t* npos,
                                      std::int32_t* big_list, unsigned long long* big_count) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t n = n_dst.get();
  for (std::int64_t i = thread_id() / warp_size; i < n; i += thread_count() / warp_size) {
    const std::int64_t s = start[i], dg = deg[i];
    if (dg > big_degree) {
      if (lane == 0) {
        npos[i] = 0;
        big_list[atomicAdd(big_count, 1ull)] = static_cast<std::int32_t>(i);
      }
      continue;
    }
    std::int64_t c = 0;
#pragma unroll 8
    for (std::int64_t p = lane; p < dg; p += warp_size) c += w(i, s, p) > 0.0f ? 1 : 0;
    for (int o = warp_size / 2; o > 0; o /= 2) c += __shfl_xor_sync(full_mask, c, o);
    if (lane == 0) npos[i] = c;
  }
}

/// Positive weights of the listed big nodes: block (x, y) adds chunks y, y + gridDim.y, ...
/// (count_chunk edges each) of every gridDim.x-th listed node.
template <typename W>
__global__ void __launch_bounds__(count_big_threads)
    count_big_kernel(const std::int32_t* big_list, const unsigned long long* big_count,
                     const std::int64_t* start, const std::int64_t* deg, W w, std::int64_t* npos) {
  using block_reduce = cub::BlockReduce<std::int64_t, count_big_threads>;
  __shared__ typename block_reduce::TempStorage storage;
  const std::int64_t nbig = static_cast<std::int64_t>(*big_count);
  for (std::int64_t b = blockIdx.x; b < nbig; b += gridDim.x) {
    const std::int64_t i = big_list[b];
    const std::int64_t s = start[i], dg = deg[i];
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * count_chunk;
    if (first >= dg) continue;  // the whole block leaves together
    std::int64_t c = 0;
    for (std::int64_t lo = first; lo < dg;
         lo += static_cast<std::int64_t>(gridDim.y) * count_chunk) {
      const std::int64_t hi = lo + count_chunk < dg ? lo + count_chunk : dg;
#pragma unroll 8
      for (std::int64_t p = lo + threadIdx.x; p < hi; p += count_big_threads) {
        c += w(i, s, p) > 0.0f ? 1 : 0;
      }
    }
    c = block_reduce(storage).Sum(c);
    if (threadIdx.x == 0 && c > 0)
      atomicAdd(reinterpret_cast<unsigned long long*>(npos + i),
                static_cast<unsigned long long>(c));
    __syncthreads();
  }
}

/// The count of positions of a node for the offsets scan: min(counts[i], cap) (weighted hops
/// keep the positive-weight count in counts and cap it by the fanout).
struct capped_count {
  const std::int64_t* counts;
  std::int64_t cap;
  std::int64_t n;  ///< items past n count 0
  WM_HOST_DEVICE std::int64_t operator()(std::int64_t i) const {
    if (i >= n) return 0;
    const std::int64_t c = counts[i];
    return c < cap ? c : cap;
  }
};

/// Edge ids of every position of the frontier (gathering weights of distributed memory).
__global__ void frontier_edges_kernel(const std::int64_t* start, const std::int64_t* deg,
                                      const std::int64_t* base, std::int64_t n, std::int64_t* out) {
  const int lane = threadIdx.x % warp_size;
  for (std::int64_t i = thread_id() / warp_size; i < n; i += thread_count() / warp_size) {
    const std::int64_t s = start[i], dg = deg[i], b = base[i];
    for (std::int64_t p = lane; p < dg; p += warp_size) out[b + p] = s + p;
  }
}

/// The number of weights in [0, n) that are not > 0 (NaN included), added to *out.
template <typename Gen>
__global__ void count_nonpositive_kernel(Gen w, std::int64_t n, unsigned long long* out) {
  unsigned long long c = 0;
  for (std::int64_t e = thread_id(); e < n; e += thread_count()) c += *w.At(e) > 0.0f ? 0 : 1;
  for (int o = warp_size / 2; o > 0; o /= 2) c += __shfl_xor_sync(full_mask, c, o);
  if (threadIdx.x % warp_size == 0 && c > 0) atomicAdd(out, c);
}

/// A thread's largest degree m and count of big rows, reduced over its warp into out[0]
/// (atomicMax) and out[1] (atomicAdd).  Every lane of the warp calls it.
__device__ __forceinline__ void add_degree_stats(unsigned long long m, unsigned long long big,
                                                 unsigned long long* out) {
  for (int o = warp_size / 2; o > 0; o /= 2) {
    const unsigned long long other = __shfl_xor_sync(full_mask, m, o);
    m = other > m ? other : m;
    big += __shfl_xor_sync(full_mask, big, o);
  }
  if (threadIdx.x % warp_size == 0) {
    atomicMax(out, m);
    atomicAdd(out + 1, big);
  }
}

/// The largest degree of rows [0, n) read through ro into out[0] (atomicMax), and the number
/// of rows above big_degree into out[1].  Rows outside [0, num_edges] count as empty (the
/// sampler reports them when it meets them).
template <typename Gen>
__global__ void degree_stats_kernel(Gen ro, std::int64_t n, std::int64_t num_edges,
                                    unsigned long long* out) {
  unsigned long long m = 0, big = 0;
  for (std::int64_t v = thread_id(); v < n; v += thread_count()) {
    const std::int64_t s = *ro.At(v), e = *ro.At(v + 1);
    const std::int64_t dg = row_in_bounds(s, e, num_edges) ? e - s : 0;
    if (static_cast<unsigned long long>(dg) > m) m = static_cast<unsigned long long>(dg);
    big += dg > big_degree ? 1 : 0;
  }
  add_degree_stats(m, big, out);
}

/// degree_stats_kernel for the n rows an owner holds from node `first` on (ro_owned).
__global__ void owned_degree_stats_kernel(ro_owned ro, std::int64_t first, std::int64_t n,
                                          unsigned long long* out) {
  unsigned long long m = 0, big = 0;
  for (std::int64_t v = thread_id(); v < n; v += thread_count()) {
    std::int64_t s, e;
    ro(0, first + v, s, e);
    const std::int64_t dg = s >= 0 ? e - s : 0;
    if (static_cast<unsigned long long>(dg) > m) m = static_cast<unsigned long long>(dg);
    big += dg > big_degree ? 1 : 0;
  }
  add_degree_stats(m, big, out);
}

}  // namespace wholestore::graph::gpu
