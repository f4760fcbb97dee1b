/*
 * Warp-level selection of the GPU sampler's fill kernels (sample_fill_kernels.cuh): the
 * weighted race (entries sorted and merged across lanes, one pass of a race round), the
 * sorted write of chosen positions, uniform draws with replacement and Floyd's algorithm in a
 * tile.  The draws are those of graph/detail/sample_select.hpp, so the CPU path picks the same
 * edges.
 * Included by sampling_fill.cu only: it defines functions that are not templates.
 */
#pragma once

#include "sample_common.cuh"

#include <cuda_runtime.h>

#include <cstdint>

namespace wholestore::graph::gpu {

// ---- selection helpers (one warp) ------------------------------------------------------------

struct race_entry {
  double t;
  std::int64_t i;
};

__device__ __forceinline__ race_entry shfl_entry(race_entry e, int src) {
  return {__shfl_sync(full_mask, e.t, src), __shfl_sync(full_mask, e.i, src)};
}
__device__ __forceinline__ race_entry shfl_xor_entry(race_entry e, int mask) {
  return {__shfl_xor_sync(full_mask, e.t, mask), __shfl_xor_sync(full_mask, e.i, mask)};
}
__device__ __forceinline__ bool before(const race_entry& a, const race_entry& b) {
  return d::race_before(a.t, a.i, b.t, b.i);
}
__device__ __forceinline__ race_entry none_entry() {
  return {__longlong_as_double(0x7ff0000000000000ll), INT64_MAX};
}

/// Bitonic sort of one entry per lane, ascending in race order across lanes.
__device__ __forceinline__ race_entry warp_sort(race_entry e, int lane) {
  for (int k = 2; k <= warp_size; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      race_entry o = shfl_xor_entry(e, j);
      const bool ascending = (lane & k) == 0;
      const bool lower = (lane & j) == 0;
      // The lower lane of an ascending pair keeps the smaller entry, and so on.
      const bool take = (lower == ascending) ? before(o, e) : before(e, o);
      if (take) e = o;
    }
  }
  return e;
}

/// Bitonic merge of a bitonic sequence across lanes into ascending order.
__device__ __forceinline__ race_entry warp_merge(race_entry e, int lane) {
  for (int j = warp_size / 2; j > 0; j >>= 1) {
    race_entry o = shfl_xor_entry(e, j);
    const bool lower = (lane & j) == 0;
    const bool take = lower ? before(o, e) : before(e, o);
    if (take) e = o;
  }
  return e;
}

/// Folds the ascending list `other` (one entry per lane) into the ascending list `best`,
/// keeping the 32 earliest of both.
__device__ __forceinline__ race_entry merge_lists(race_entry best, race_entry other, int lane) {
  const race_entry rev = shfl_entry(other, warp_size - 1 - lane);
  if (before(rev, best)) best = rev;  // bitonic: the 32 smallest of both
  return warp_merge(best, lane);
}

/// Candidates of a chunk above which race_pass sorts the chunk instead of inserting them.
constexpr int insert_max = 6;
/// Chunks whose weights race_pass loads ahead.
constexpr int loads_ahead = 4;

/// The exact race time, out of line: few edges get this far, and the hot loop stays small
/// (with it inlined, and the loop unrolled, the fill kernels were bound by instruction fetch).
__device__ __noinline__ double exact_race_time(std::uint64_t x, float w) {
  return d::race_time_of_draw(x, w);
}

/// best (ascending across lanes) with the lanes' entries folded in, out of line for the same
/// reason: a chunk needs it only while the bar is high.
__device__ __noinline__ race_entry fold_chunk(race_entry best, race_entry e, int lane) {
  return merge_lists(best, warp_sort(e, lane), lane);
}

/// Edge p (weight wv) as a race entry of the current round, or none_entry when it is never
/// taken (weight not > 0), certainly later than `bar`, or not after `last` (the last entry of
/// the previous rounds; have_last false in the first round).
__device__ __forceinline__ race_entry race_candidate(std::uint64_t key, std::int64_t p, float wv,
                                                     const race_entry& bar, bool have_last,
                                                     const race_entry& last) {
  if (!(wv > 0.0f)) return none_entry();
  const std::uint64_t x = d::draw(key, static_cast<std::uint64_t>(p));
  if (!d::race_may_beat(x, wv, bar.t)) return none_entry();
  const race_entry c{exact_race_time(x, wv), p};
  if (have_last && !before(last, c)) return none_entry();
  return c;
}

/// One warp's pass of a race round over positions first, first + step, ... below `end` (in
/// chunks of 32): returns the 32 earliest candidates (ascending across lanes), pruning with
/// the need-th.  Warps racing parts of one edge range may share `shared_bar` (the bits of a
/// race time, in shared memory; null: none): each warp's need-th earliest bounds the range's
/// need-th earliest from above, so all of them prune with the lowest.
template <typename W>
__device__ __forceinline__ race_entry race_pass(std::uint64_t key, std::int64_t i,
                                                std::int64_t start, std::int64_t end,
                                                std::int64_t first, std::int64_t step, int need,
                                                bool have_last, const race_entry& last, W w,
                                                unsigned long long* shared_bar, int lane) {
  race_entry best = none_entry();
  race_entry bar = none_entry();  // what a candidate must beat
  // The own need-th earliest becomes the bar, lowered to the shared one, which it may lower.
  auto settle = [&]() {
    bar = shfl_entry(best, need - 1);
    if (shared_bar == nullptr) return;
    const auto bits = static_cast<unsigned long long>(__double_as_longlong(bar.t));
    if (lane == 0) atomicMin(shared_bar, bits);  // race times are >= 0: bits order as values
    const double common = __longlong_as_double(
        static_cast<long long>(*static_cast<volatile unsigned long long*>(shared_bar)));
    if (common < bar.t) bar = race_entry{common, INT64_MAX};
  };
  // The weights of the next chunks are loaded ahead, a queue of loads_ahead: the loop is otherwise
  // bound by one memory latency per chunk.
  float ahead[loads_ahead];
#pragma unroll
  for (int u = 0; u < loads_ahead; ++u) {
    const std::int64_t q = first + u * step + lane;
    ahead[u] = q < end ? w(i, start, q) : 0.0f;
  }
  for (std::int64_t b = first; b < end; b += step) {
    const float wv = ahead[0];
#pragma unroll
    for (int u = 0; u + 1 < loads_ahead; ++u) ahead[u] = ahead[u + 1];
    const std::int64_t q = b + loads_ahead * step + lane;
    ahead[loads_ahead - 1] = q < end ? w(i, start, q) : 0.0f;
    if (shared_bar != nullptr) {
      const double common = __longlong_as_double(
          static_cast<long long>(*static_cast<volatile unsigned long long*>(shared_bar)));
      if (common < bar.t) bar = race_entry{common, INT64_MAX};
    }
    const std::int64_t p = b + lane;
    race_entry e = none_entry();
    if (p < end) e = race_candidate(key, p, wv, bar, have_last, last);
    unsigned m = __ballot_sync(full_mask, before(e, bar));
    if (m == 0) continue;
    if (__popc(m) > insert_max) {
      best = fold_chunk(best, e, lane);
      settle();
      continue;
    }
    // Few candidates (the usual case once the bar is low): insert them one by one.
    while (m != 0) {
      const race_entry c = shfl_entry(e, __ffs(m) - 1);
      m &= m - 1;
      if (!before(c, bar)) continue;  // an earlier insertion lowered the bar below it
      const int pos = __popc(__ballot_sync(full_mask, before(best, c)));
      const race_entry up{__shfl_up_sync(full_mask, best.t, 1),
                          __shfl_up_sync(full_mask, best.i, 1)};
      if (lane == pos) {
        best = c;
      } else if (lane > pos) {
        best = up;
      }
      settle();
    }
  }
  return best;
}

/// Writes the global edge ids of the `count` distinct positions in tmp[0, count) in ascending
/// order (threads `rank` of `threads`).
__device__ __forceinline__ void emit_sorted(const std::int64_t* tmp, std::int64_t count,
                                            std::int64_t start, std::int64_t* eid, int rank,
                                            int threads) {
  for (std::int64_t a = rank; a < count; a += threads) {
    const std::int64_t v = tmp[a];
    std::int64_t r = 0;
    for (std::int64_t b = 0; b < count; ++b) r += tmp[b] < v ? 1 : 0;
    eid[r] = start + v;
  }
}

/// Uniform with replacement: draw c of a node of degree deg > 0, for c = lane, lane + step,
/// ... below k (draw order).
__device__ __forceinline__ void draw_with_replacement(std::uint64_t key, std::int64_t deg, int k,
                                                      std::int64_t start, int lane, int step,
                                                      std::int64_t* eid) {
  for (int c = lane; c < k; c += step) {
    eid[c] =
        start + static_cast<std::int64_t>(d::rand_below(d::draw(key, static_cast<std::uint64_t>(c)),
                                                        static_cast<std::uint64_t>(deg)));
  }
}

/// Floyd's algorithm for deg > k with k no larger than the tile, a draw per lane (as
/// detail::select_uniform): lane c draws t_c for j_c = deg - k + c, then the results are
/// resolved in order (r_c = j_c when t_c equals an earlier result, else t_c) and written
/// ascending.  Every lane of the tile takes part.
template <typename Tile>
__device__ __forceinline__ void floyd_in_tile(const Tile& tile, std::uint64_t key, std::int64_t deg,
                                              int k, std::int64_t start, std::int64_t* eid) {
  const int lane = static_cast<int>(tile.thread_rank());
  const bool active = lane < k;
  const std::int64_t j = deg - k + lane;
  const std::int64_t t =
      active
          ? static_cast<std::int64_t>(d::rand_below(d::draw(key, static_cast<std::uint64_t>(lane)),
                                                    static_cast<std::uint64_t>(j + 1)))
          : -1;
  bool seen = false;
  std::int64_t r = -1;
  for (int c = 0; c < k; ++c) {
    const std::int64_t rc = tile.shfl(seen ? j : t, c);
    if (lane == c) r = rc;
    if (lane > c) seen |= (t == rc);
  }
  int rank = 0;
  for (int c = 0; c < k; ++c) rank += tile.shfl(r, c) < r ? 1 : 0;
  if (active) eid[rank] = start + r;
}

}  // namespace wholestore::graph::gpu
