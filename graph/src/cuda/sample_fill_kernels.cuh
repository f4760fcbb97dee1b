/*
 * Fill kernels of the GPU sampler (sampling_fill.cu): the global edge ids of every dst node's
 * sampled positions.  A warp per node (fill_kernel), a tile of 4, 8 or 16 lanes for small
 * uniform fanouts (fill_small_kernel); weighted nodes above big_degree edges a block each
 * (fill_big_kernel), or for fanouts 1 to 32 raced in segments of segment_edges edges, a block each
 * (race_segments_kernel), then merged (merge_segments_kernel).
 * Included by sampling_fill.cu only: it defines functions that are not templates.
 */
#pragma once

#include "sample_common.cuh"
#include "sample_select_warp.cuh"

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cub/block/block_scan.cuh>

#include <cstdint>

namespace wholestore::graph::gpu {

/// One warp per dst node: the global edge ids of its sampled positions, in the method's order,
/// at eid[offsets[i] ...].  tmp (same indexing) holds positions for the paths that sort through
/// memory.  W reads weights (weighted only); weighted nodes above big_degree edges are left to
/// fill_big_kernel.
template <typename W>
__global__ void __launch_bounds__(fill_threads, fill_min_blocks)
    fill_kernel(const std::int64_t* dst, const std::int64_t* start_arr, const std::int64_t* deg_arr,
                const std::int64_t* npos_arr, const std::int64_t* offsets, device_count n_dst,
                sample_method method, int fanout, seed_ref random_seed, int hop, W w,
                std::int64_t* eid_all, std::int64_t* tmp_all) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t n = n_dst.get();
  // Whole warps share i: every shuffle below has all 32 lanes.
  for (std::int64_t i = thread_id() / warp_size; i < n; i += thread_count() / warp_size) {
    const std::int64_t start = start_arr[i], deg = deg_arr[i], off = offsets[i];
    std::int64_t* eid = eid_all + off;
    std::int64_t* tmp = tmp_all + off;
    const int k = fanout;
    const std::uint64_t key = d::node_key(random_seed.at(i), hop, dst[i]);

    if (k < 0 || (method == sample_method::uniform && deg <= k)) {
      for (std::int64_t p = lane; p < deg; p += warp_size) eid[p] = start + p;
      continue;
    }
    if (method == sample_method::uniform_with_replacement) {
      if (deg == 0) continue;
      draw_with_replacement(key, deg, k, start, lane, warp_size, eid);
      continue;
    }
    if (method == sample_method::uniform) {
      // Floyd, deg > k >= 0: a draw per lane, resolved in draw order (floyd_in_tile), in
      // rounds of 32 through memory for larger fanouts.
      if (k <= warp_size) {
        floyd_in_tile(
            cooperative_groups::tiled_partition<warp_size>(cooperative_groups::this_thread_block()),
            key, deg, k, start, eid);
        continue;
      }
      for (int base = 0; base < k; base += warp_size) {
        const int c = base + lane;
        const bool active = c < k;
        const std::int64_t j = deg - k + c;
        const std::int64_t t = active ? static_cast<std::int64_t>(d::rand_below(
                                            d::draw(key, static_cast<std::uint64_t>(c)),
                                            static_cast<std::uint64_t>(j + 1)))
                                      : -1;
        bool seen = false;
        if (active) {
          for (int q = 0; q < base; ++q) seen |= (tmp[q] == t);
        }
        const int chunk = k - base < warp_size ? k - base : warp_size;
        std::int64_t r = -1;
        for (int cc = 0; cc < chunk; ++cc) {
          const std::int64_t rc = __shfl_sync(full_mask, seen ? j : t, cc);
          if (lane == cc) r = rc;
          if (lane > cc) seen |= (t == rc);
        }
        if (active) tmp[c] = r;
        __syncwarp();
      }
      emit_sorted(tmp, k, start, eid, lane, warp_size);
      __syncwarp();
      continue;
    }
    // Weighted, k >= 0.
    if (deg > big_degree) continue;  // fill_big_kernel's
    const std::int64_t npos = npos_arr[i];
    if (npos <= k) {  // every positive-weight edge, ascending
      std::int64_t written = 0;
      for (std::int64_t b = 0; b < deg; b += warp_size) {
        const std::int64_t p = b + lane;
        const bool take = p < deg && w(i, start, p) > 0.0f;
        const unsigned m = __ballot_sync(full_mask, take);
        if (take) eid[written + __popc(m & ((1u << lane) - 1u))] = start + p;
        written += __popc(m);
      }
      continue;
    }
    // The k earliest race times, 32 per round: each round keeps the 32 earliest entries that
    // come after the last one taken.
    race_entry last{0.0, -1};
    bool have_last = false;
    for (std::int64_t taken = 0; taken < k;) {
      const std::int64_t left = k - taken;
      const int need = left < warp_size ? static_cast<int>(left) : warp_size;
      const race_entry best =
          race_pass(key, i, start, deg, 0, warp_size, need, have_last, last, w, nullptr, lane);
      if (lane < need) tmp[taken + lane] = best.i;
      last = shfl_entry(best, need - 1);
      have_last = true;
      taken += need;
    }
    __syncwarp();
    emit_sorted(tmp, k, start, eid, lane, warp_size);
    __syncwarp();
  }
}

/// Weighted fill of the listed big nodes (more than big_degree edges), a block each: every
/// warp runs the race over its share of the edges, warp 0 merges the warps' lists.
template <typename W>
__global__ void __launch_bounds__(fill_big_threads)
    fill_big_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                    const std::int64_t* deg_arr, const std::int64_t* npos_arr,
                    const std::int64_t* offsets, const std::int32_t* big_list,
                    const unsigned long long* big_count, int fanout, seed_ref random_seed, int hop,
                    W w, bool segmented, std::int64_t* eid_all, std::int64_t* tmp_all) {
  constexpr int warps_per_block = fill_big_threads / warp_size;
  using block_scan = cub::BlockScan<int, fill_big_threads>;
  __shared__ race_entry lists[warps_per_block][warp_size];
  __shared__ race_entry round_last;
  __shared__ typename block_scan::TempStorage scan_storage;
  const int lane = threadIdx.x % warp_size;
  const int warp = threadIdx.x / warp_size;
  const int k = fanout;
  const std::int64_t nbig = static_cast<std::int64_t>(*big_count);
  for (std::int64_t b = blockIdx.x; b < nbig; b += gridDim.x) {
    const std::int64_t i = big_list[b];
    const std::int64_t start = start_arr[i], deg = deg_arr[i], npos = npos_arr[i];
    std::int64_t* eid = eid_all + offsets[i];
    std::int64_t* tmp = tmp_all + offsets[i];
    if (npos <= k) {  // every positive-weight edge, ascending, a block-wide chunk at a time
      std::int64_t written = 0;
      for (std::int64_t base = 0; base < deg; base += fill_big_threads) {
        const std::int64_t p = base + threadIdx.x;
        const int take = (p < deg && w(i, start, p) > 0.0f) ? 1 : 0;
        int before_me = 0, chunk_total = 0;
        block_scan(scan_storage).ExclusiveSum(take, before_me, chunk_total);
        if (take) eid[written + before_me] = start + p;
        written += chunk_total;
        __syncthreads();
      }
      continue;
    }
    if (segmented) continue;  // race_segments_kernel's
    const std::uint64_t key = d::node_key(random_seed.at(i), hop, dst[i]);
    race_entry last{0.0, -1};
    bool have_last = false;
    for (std::int64_t taken = 0; taken < k;) {
      const std::int64_t left = k - taken;
      const int need = left < warp_size ? static_cast<int>(left) : warp_size;
      race_entry best = race_pass(key, i, start, deg, static_cast<std::int64_t>(warp) * warp_size,
                                  fill_big_threads, need, have_last, last, w, nullptr, lane);
      lists[warp][lane] = best;
      __syncthreads();
      if (warp == 0) {
        for (int o = 1; o < warps_per_block; ++o) best = merge_lists(best, lists[o][lane], lane);
        if (lane < need) tmp[taken + lane] = best.i;
        const race_entry l = shfl_entry(best, need - 1);
        if (lane == 0) round_last = l;
      }
      __syncthreads();
      last = round_last;
      have_last = true;
      taken += need;
    }
    emit_sorted(tmp, k, start, eid, static_cast<int>(threadIdx.x), fill_big_threads);
    __syncthreads();  // lists and round_last are reused by the next node
  }
}

/// Segments of listed big node j (0 past the list): the input of the segment offsets scan.
struct big_segments {
  const std::int32_t* big_list;
  const unsigned long long* big_count;
  const std::int64_t* deg;
  WM_HOST_DEVICE std::int64_t operator()(std::int64_t j) const {
    if (j >= static_cast<std::int64_t>(*big_count)) return 0;
    return (deg[big_list[j]] + segment_edges - 1) / segment_edges;
  }
};

/// The race of big nodes (fanout 1 to 32) spread over blocks: block-iteration s takes segment
/// s (segment_edges edges) of listed node j, where seg_base[j] <= s < seg_base[j + 1], and writes
/// the segment's 32 earliest race entries to cand[32 s ...].  Nodes with at most `fanout`
/// positive weights are fill_big_kernel's.
template <typename W>
__global__ void __launch_bounds__(fill_big_threads)
    race_segments_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                         const std::int64_t* deg_arr, const std::int64_t* npos_arr,
                         const std::int32_t* big_list, const unsigned long long* big_count,
                         const std::int64_t* seg_base, int fanout, seed_ref random_seed, int hop,
                         W w, race_entry* cand) {
  constexpr int warps_per_block = fill_big_threads / warp_size;
  __shared__ race_entry lists[warps_per_block][warp_size];
  __shared__ unsigned long long segment_bar;
  const int lane = threadIdx.x % warp_size;
  const int warp = threadIdx.x / warp_size;
  const std::int64_t nbig = static_cast<std::int64_t>(*big_count);
  const std::int64_t total = seg_base[nbig];
  const race_entry no_last{0.0, -1};
  for (std::int64_t s = blockIdx.x; s < total; s += gridDim.x) {
    std::int64_t lo = 0, hi = nbig;  // seg_base[lo] <= s < seg_base[hi]
    while (hi - lo > 1) {
      const std::int64_t mid = (lo + hi) / 2;
      if (seg_base[mid] <= s) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const std::int64_t i = big_list[lo];
    if (npos_arr[i] <= fanout) continue;
    const std::int64_t start = start_arr[i];
    const std::int64_t seg_lo = (s - seg_base[lo]) * segment_edges;
    const std::int64_t seg_hi =
        seg_lo + segment_edges < deg_arr[i] ? seg_lo + segment_edges : deg_arr[i];
    const std::uint64_t key = d::node_key(random_seed.at(i), hop, dst[i]);
    if (threadIdx.x == 0) segment_bar = 0x7ff0000000000000ull;  // +infinity
    __syncthreads();
    race_entry best = race_pass(key, i, start, seg_hi, seg_lo + warp * warp_size, fill_big_threads,
                                fanout, false, no_last, w, &segment_bar, lane);
    lists[warp][lane] = best;
    __syncthreads();
    if (warp == 0) {
      for (int o = 1; o < warps_per_block; ++o) best = merge_lists(best, lists[o][lane], lane);
      cand[s * warp_size + lane] = best;
    }
    __syncthreads();
  }
}

/// One warp per listed big node raced by segments: merges its segments' lists and writes the
/// `fanout` earliest positions, ascending, as edge ids.
__global__ void merge_segments_kernel(const std::int64_t* start_arr, const std::int64_t* npos_arr,
                                      const std::int64_t* offsets, const std::int32_t* big_list,
                                      const unsigned long long* big_count,
                                      const std::int64_t* seg_base, int fanout,
                                      const race_entry* cand, std::int64_t* eid_all,
                                      std::int64_t* tmp_all) {
  const int lane = threadIdx.x % warp_size;
  const std::int64_t nbig = static_cast<std::int64_t>(*big_count);
  for (std::int64_t j = thread_id() / warp_size; j < nbig; j += thread_count() / warp_size) {
    const std::int64_t i = big_list[j];
    if (npos_arr[i] <= fanout) continue;
    race_entry best = none_entry();
    for (std::int64_t s = seg_base[j]; s < seg_base[j + 1]; ++s) {
      best = merge_lists(best, cand[s * warp_size + lane], lane);
    }
    std::int64_t* tmp = tmp_all + offsets[i];
    if (lane < fanout) tmp[lane] = best.i;
    __syncwarp();
    emit_sorted(tmp, fanout, start_arr[i], eid_all + offsets[i], lane, warp_size);
    __syncwarp();
  }
}

/// fill_kernel for small fanouts of the uniform methods (0 <= fanout <= G): a tile of G
/// lanes per dst node instead of a warp, the same draws and the same order.
template <int G>
__global__ void fill_small_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                                  const std::int64_t* deg_arr, const std::int64_t* offsets,
                                  device_count n_dst, sample_method method, int fanout,
                                  seed_ref random_seed, int hop, std::int64_t* eid_all) {
  namespace cg = cooperative_groups;
  const cg::thread_block_tile<G> tile = cg::tiled_partition<G>(cg::this_thread_block());
  const int lane = static_cast<int>(tile.thread_rank());
  const std::int64_t n = n_dst.get();
  // Whole tiles share i.
  for (std::int64_t i = thread_id() / G; i < n; i += thread_count() / G) {
    const std::int64_t start = start_arr[i], deg = deg_arr[i];
    std::int64_t* eid = eid_all + offsets[i];
    const int k = fanout;
    if (method == sample_method::uniform && deg <= k) {
      for (std::int64_t p = lane; p < deg; p += G) eid[p] = start + p;
      continue;
    }
    const std::uint64_t key = d::node_key(random_seed.at(i), hop, dst[i]);
    if (method == sample_method::uniform_with_replacement) {
      if (deg == 0) continue;
      draw_with_replacement(key, deg, k, start, lane, G, eid);
      continue;
    }
    floyd_in_tile(tile, key, deg, k, start, eid);  // deg > k, k <= G
  }
}

}  // namespace wholestore::graph::gpu
