/*
 * Kernels of the GPU sampler (sampling_gpu.cu).  Internal.
 *
 * A hop runs: dst_info (start, degree and count of positions of every dst node,
 * detail::max_sample_count), for weighted hops the count of positive weights (a warp per node;
 * nodes above kBigDegree edges get several blocks; skipped when every weight of the graph is
 * positive, the degrees being those counts), an exclusive scan into the block's offsets, fill
 * (a tile of 4, 8 or 16 lanes per node for small uniform fanouts, else a warp; weighted nodes
 * above kBigDegree edges raced in segments of kSegment edges, a block each, then merged)
 * writing the global edge ids of the sampled positions, then the relabel:
 *   entries   = the dst nodes (positions 0..n_dst-1), then the neighbors in edge order;
 *   insert    = every entry's node id goes into an open-addressing table whose slot keeps the
 *               smallest position holding that id (atomicMin), so the first occurrence wins
 *               whatever the thread order; slot[x] remembers where entry x landed;
 *   scan      = exclusive sum of "x is the first occurrence of a neighbor not among the dst
 *               nodes" gives new nodes their rank in order of first position;
 *   assign    = local id of every entry (src_index) and src_nodes, from the table.
 * The counts of a hop (dst nodes, edges) live on the device; kernels read them there and run
 * grid-stride loops sized by host-side upper bounds, so hops need no host round trip.
 */
#pragma once

#include <graph/detail/sample_select.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cooperative_groups.h>
#include <cuda_runtime.h>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cstdint>

namespace wholestore::graph::gpu {

namespace d = ::wholestore::graph::detail;

constexpr int kWarp = 32;
constexpr unsigned kFull = 0xffffffffu;
/// Weighted hops: nodes with more edges than this are counted and raced by whole blocks.
constexpr std::int64_t kBigDegree = 2048;
/// Edges per block when a big node is raced by several blocks (fanouts 1 to 32).
constexpr std::int64_t kSegment = 16384;
constexpr int kBigThreads = 512;      // count_big_kernel
constexpr int kBigFillThreads = 256;  // fill_big_kernel
/// Edges per block when a big node's positive weights are counted by several blocks.
constexpr std::int64_t kCountChunk = 8192;

__device__ __forceinline__ std::int64_t thread_id() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

/// A count known on the device (`live`) or, when live is null, on the host (`value`).
struct device_count {
  const long long* live;
  std::int64_t value;
  __host__ __device__ __forceinline__ std::int64_t get() const {
    return live != nullptr ? static_cast<std::int64_t>(*live) : value;
  }
};

// ---- the key table -----------------------------------------------------------------------------

/// Open addressing with linear probing; keys[s] == empty marks a free slot, first[s] the
/// smallest entry position holding keys[s] (0xffffffff while none).
template <typename K>
struct key_table {
  K* keys;
  unsigned* first;
  std::uint32_t mask;
  static constexpr K empty = ~K(0);
};

__device__ __forceinline__ std::uint32_t slot_hash(unsigned long long key) {
  return static_cast<std::uint32_t>(d::mix64(key) >> 32);
}

/// Inserts `key` seen at entry position `pos`; returns its slot.
template <typename K>
__device__ __forceinline__ std::uint32_t table_insert(key_table<K> t, K key, unsigned pos) {
  std::uint32_t s = slot_hash(key) & t.mask;
  for (;;) {
    const K cur = __ldcg(&t.keys[s]);
    if (cur == key) break;
    if (cur == key_table<K>::empty) {
      const K prev = atomicCAS(&t.keys[s], key_table<K>::empty, key);
      if (prev == key_table<K>::empty || prev == key) break;
    }
    s = (s + 1) & t.mask;
  }
  atomicMin(&t.first[s], pos);
  return s;
}

/// Hop 0 entries: the seeds.  A seed outside the graph is recorded in *bad (as ~position, the
/// largest for the first one) and replaced by node 0; the call throws before returning.
template <typename K>
__global__ void seed_insert_kernel(const std::int64_t* seeds, std::int64_t n,
                                   std::int64_t num_nodes, key_table<K> table, std::uint32_t* slot,
                                   unsigned long long* bad) {
  for (std::int64_t i = thread_id(); i < n; i += thread_count()) {
    std::int64_t s = seeds[i];
    if (s < 0 || s >= num_nodes) {
      atomicMax(bad, ~static_cast<unsigned long long>(i));
      s = 0;
    }
    slot[i] = table_insert(table, static_cast<K>(s), static_cast<unsigned>(i));
  }
}

/// A graph changed after its loader checked it: fault[0] = 1 for a row outside the edges (at
/// node fault[1]), 2 for a column index outside the nodes (at edge fault[1]); the first fault
/// wins.  The caller goes on with the row empty or the neighbor replaced by node 0, so nothing
/// is read or written out of bounds, and the call throws before returning.
constexpr long long kFaultRow = 1;
constexpr long long kFaultColumn = 2;

__device__ __forceinline__ void record_fault(long long* fault, long long kind, long long where) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(fault), 0ull,
                static_cast<unsigned long long>(kind)) == 0ull) {
    fault[1] = where;
  }
}

/// Whether [s, e) is a row within a graph of num_edges edges.
__device__ __forceinline__ bool row_in_bounds(std::int64_t s, std::int64_t e,
                                              std::int64_t num_edges) {
  return s >= 0 && e >= s && e <= num_edges;
}

/// Row offsets of dst node i (id v), read through a PtrGen.
template <typename Gen>
struct ro_direct {
  Gen gen;
  __device__ __forceinline__ void operator()(std::int64_t /*i*/, std::int64_t v, std::int64_t& s,
                                             std::int64_t& e) const {
    s = *gen.At(v);
    e = *gen.At(v + 1);
  }
};

/// Row offsets gathered for the frontier (distributed memory): ro2[2i], ro2[2i + 1].
struct ro_gathered {
  const std::int64_t* ro2;
  __device__ __forceinline__ void operator()(std::int64_t i, std::int64_t /*v*/, std::int64_t& s,
                                             std::int64_t& e) const {
    s = ro2[2 * i];
    e = ro2[2 * i + 1];
  }
};

/// start, degree and count of every dst node (counts[i] = 0 for n_dst <= i <= bound, so that
/// the scan over bound + 1 items ends with the edge total).  With big_list (weighted hops on
/// graphs whose weights are all positive, where no counting pass runs): counts[i] is the
/// degree, the positive-weight count that pass would find, and nodes above kBigDegree edges
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
      record_fault(fault, kFaultRow, v);
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
    if (e - s > kBigDegree) big_list[atomicAdd(big_count, 1ull)] = static_cast<std::int32_t>(i);
  }
}

/// Index list for gathering row_offsets at v and v + 1 of every dst node.
__global__ void row_index_kernel(const std::int64_t* dst, std::int64_t n, std::int64_t* idx) {
  for (std::int64_t i = thread_id(); i < n; i += thread_count()) {
    idx[2 * i] = dst[i];
    idx[2 * i + 1] = dst[i] + 1;
  }
}

/// Reads the weight of position p of dst node i (whose edges start at `start`).
template <typename Gen>
struct direct_weights {
  Gen gen;
  __device__ __forceinline__ float operator()(std::int64_t /*i*/, std::int64_t start,
                                              std::int64_t p) const {
    return *gen.At(start + p);
  }
};

/// Weights gathered for the frontier (distributed memory): node i's at buf[base[i] + p].
struct gathered_weights {
  const float* buf;
  const std::int64_t* base;
  __device__ __forceinline__ float operator()(std::int64_t i, std::int64_t /*start*/,
                                              std::int64_t p) const {
    return buf[base[i] + p];
  }
};

/// Weighted hops (fanout >= 0): npos[i] = the number of positive weights of dst node i.  A
/// warp per node; nodes above kBigDegree edges are listed for count_big_kernel instead (their
/// npos starts at 0 and collects its blocks' sums).
template <typename W>
__global__ void count_weighted_kernel(const std::int64_t* start, const std::int64_t* deg,
                                      device_count n_dst, W w, std::int64_t* npos,
                                      std::int32_t* big_list, unsigned long long* big_count) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t n = n_dst.get();
  for (std::int64_t i = thread_id() / kWarp; i < n; i += thread_count() / kWarp) {
    const std::int64_t s = start[i], dg = deg[i];
    if (dg > kBigDegree) {
      if (lane == 0) {
        npos[i] = 0;
        big_list[atomicAdd(big_count, 1ull)] = static_cast<std::int32_t>(i);
      }
      continue;
    }
    std::int64_t c = 0;
#pragma unroll 8
    for (std::int64_t p = lane; p < dg; p += kWarp) c += w(i, s, p) > 0.0f ? 1 : 0;
    for (int o = kWarp / 2; o > 0; o /= 2) c += __shfl_xor_sync(kFull, c, o);
    if (lane == 0) npos[i] = c;
  }
}

/// Positive weights of the listed big nodes: block (x, y) adds chunk y (kCountChunk edges) of
/// every gridDim.x-th listed node.
template <typename W>
__global__ void __launch_bounds__(kBigThreads)
    count_big_kernel(const std::int32_t* big_list, const unsigned long long* big_count,
                     const std::int64_t* start, const std::int64_t* deg, W w, std::int64_t* npos) {
  using block_reduce = cub::BlockReduce<std::int64_t, kBigThreads>;
  __shared__ typename block_reduce::TempStorage storage;
  const std::int64_t nbig = static_cast<std::int64_t>(*big_count);
  for (std::int64_t b = blockIdx.x; b < nbig; b += gridDim.x) {
    const std::int64_t i = big_list[b];
    const std::int64_t s = start[i], dg = deg[i];
    const std::int64_t lo = static_cast<std::int64_t>(blockIdx.y) * kCountChunk;
    if (lo >= dg) continue;  // the whole block leaves together
    const std::int64_t hi = lo + kCountChunk < dg ? lo + kCountChunk : dg;
    std::int64_t c = 0;
#pragma unroll 8
    for (std::int64_t p = lo + threadIdx.x; p < hi; p += kBigThreads) {
      c += w(i, s, p) > 0.0f ? 1 : 0;
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
  __host__ __device__ __forceinline__ std::int64_t operator()(std::int64_t i) const {
    if (i >= n) return 0;
    const std::int64_t c = counts[i];
    return c < cap ? c : cap;
  }
};

/// Edge ids of every position of the frontier (gathering weights of distributed memory).
__global__ void frontier_edges_kernel(const std::int64_t* start, const std::int64_t* deg,
                                      const std::int64_t* base, std::int64_t n, std::int64_t* out) {
  const int lane = threadIdx.x % kWarp;
  for (std::int64_t i = thread_id() / kWarp; i < n; i += thread_count() / kWarp) {
    const std::int64_t s = start[i], dg = deg[i], b = base[i];
    for (std::int64_t p = lane; p < dg; p += kWarp) out[b + p] = s + p;
  }
}

// ---- selection helpers (one warp) ------------------------------------------------------------

struct race_entry {
  double t;
  std::int64_t i;
};

__device__ __forceinline__ race_entry shfl_entry(race_entry e, int src) {
  return {__shfl_sync(kFull, e.t, src), __shfl_sync(kFull, e.i, src)};
}
__device__ __forceinline__ race_entry shfl_xor_entry(race_entry e, int mask) {
  return {__shfl_xor_sync(kFull, e.t, mask), __shfl_xor_sync(kFull, e.i, mask)};
}
__device__ __forceinline__ bool before(const race_entry& a, const race_entry& b) {
  return d::race_before(a.t, a.i, b.t, b.i);
}
__device__ __forceinline__ race_entry none_entry() {
  return {__longlong_as_double(0x7ff0000000000000ll), INT64_MAX};
}

/// Bitonic sort of one entry per lane, ascending in race order across lanes.
__device__ __forceinline__ race_entry warp_sort(race_entry e, int lane) {
  for (int k = 2; k <= kWarp; k <<= 1) {
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
  for (int j = kWarp / 2; j > 0; j >>= 1) {
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
  const race_entry rev = shfl_entry(other, kWarp - 1 - lane);
  if (before(rev, best)) best = rev;  // bitonic: the 32 smallest of both
  return warp_merge(best, lane);
}

/// Candidates of a chunk above which race_pass sorts the chunk instead of inserting them.
constexpr int kInsertMax = 6;
/// Chunks whose weights race_pass loads ahead.
constexpr int kAhead = 4;

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
  // The weights of the next chunks are loaded ahead, a queue of kAhead: the loop is otherwise
  // bound by one memory latency per chunk.
  float ahead[kAhead];
#pragma unroll
  for (int u = 0; u < kAhead; ++u) {
    const std::int64_t q = first + u * step + lane;
    ahead[u] = q < end ? w(i, start, q) : 0.0f;
  }
  for (std::int64_t b = first; b < end; b += step) {
    const float wv = ahead[0];
#pragma unroll
    for (int u = 0; u + 1 < kAhead; ++u) ahead[u] = ahead[u + 1];
    const std::int64_t q = b + kAhead * step + lane;
    ahead[kAhead - 1] = q < end ? w(i, start, q) : 0.0f;
    if (shared_bar != nullptr) {
      const double common = __longlong_as_double(
          static_cast<long long>(*static_cast<volatile unsigned long long*>(shared_bar)));
      if (common < bar.t) bar = race_entry{common, INT64_MAX};
    }
    const std::int64_t p = b + lane;
    race_entry e = none_entry();
    if (p < end) e = race_candidate(key, p, wv, bar, have_last, last);
    unsigned m = __ballot_sync(kFull, before(e, bar));
    if (m == 0) continue;
    if (__popc(m) > kInsertMax) {
      best = fold_chunk(best, e, lane);
      settle();
      continue;
    }
    // Few candidates (the usual case once the bar is low): insert them one by one.
    while (m != 0) {
      const race_entry c = shfl_entry(e, __ffs(m) - 1);
      m &= m - 1;
      if (!before(c, bar)) continue;  // an earlier insertion lowered the bar below it
      const int pos = __popc(__ballot_sync(kFull, before(best, c)));
      const race_entry up{__shfl_up_sync(kFull, best.t, 1), __shfl_up_sync(kFull, best.i, 1)};
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

/// One warp per dst node: the global edge ids of its sampled positions, in the method's order,
/// at eid[offsets[i] ...].  tmp (same indexing) holds positions for the paths that sort through
/// memory.  W reads weights (weighted only); weighted nodes above kBigDegree edges are left to
/// fill_big_kernel.
template <typename W>
__global__ void fill_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                            const std::int64_t* deg_arr, const std::int64_t* npos_arr,
                            const std::int64_t* offsets, device_count n_dst, sample_method method,
                            int fanout, const std::uint64_t* random_seed, int hop, W w,
                            std::int64_t* eid_all, std::int64_t* tmp_all) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t n = n_dst.get();
  // Whole warps share i: every shuffle below has all 32 lanes.
  for (std::int64_t i = thread_id() / kWarp; i < n; i += thread_count() / kWarp) {
    const std::int64_t start = start_arr[i], deg = deg_arr[i], off = offsets[i];
    std::int64_t* eid = eid_all + off;
    std::int64_t* tmp = tmp_all + off;
    const int k = fanout;
    const std::uint64_t key = d::node_key(*random_seed, hop, dst[i]);

    if (k < 0 || (method == sample_method::uniform && deg <= k)) {
      for (std::int64_t p = lane; p < deg; p += kWarp) eid[p] = start + p;
      continue;
    }
    if (method == sample_method::uniform_with_replacement) {
      if (deg == 0) continue;
      draw_with_replacement(key, deg, k, start, lane, kWarp, eid);
      continue;
    }
    if (method == sample_method::uniform) {
      // Floyd, deg > k >= 0: a draw per lane, resolved in draw order (floyd_in_tile), in
      // rounds of 32 through memory for larger fanouts.
      if (k <= kWarp) {
        floyd_in_tile(
            cooperative_groups::tiled_partition<kWarp>(cooperative_groups::this_thread_block()),
            key, deg, k, start, eid);
        continue;
      }
      for (int base = 0; base < k; base += kWarp) {
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
        const int chunk = k - base < kWarp ? k - base : kWarp;
        std::int64_t r = -1;
        for (int cc = 0; cc < chunk; ++cc) {
          const std::int64_t rc = __shfl_sync(kFull, seen ? j : t, cc);
          if (lane == cc) r = rc;
          if (lane > cc) seen |= (t == rc);
        }
        if (active) tmp[c] = r;
        __syncwarp();
      }
      emit_sorted(tmp, k, start, eid, lane, kWarp);
      __syncwarp();
      continue;
    }
    // Weighted, k >= 0.
    if (deg > kBigDegree) continue;  // fill_big_kernel's
    const std::int64_t npos = npos_arr[i];
    if (npos <= k) {  // every positive-weight edge, ascending
      std::int64_t written = 0;
      for (std::int64_t b = 0; b < deg; b += kWarp) {
        const std::int64_t p = b + lane;
        const bool take = p < deg && w(i, start, p) > 0.0f;
        const unsigned m = __ballot_sync(kFull, take);
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
      const int need = left < kWarp ? static_cast<int>(left) : kWarp;
      const race_entry best =
          race_pass(key, i, start, deg, 0, kWarp, need, have_last, last, w, nullptr, lane);
      if (lane < need) tmp[taken + lane] = best.i;
      last = shfl_entry(best, need - 1);
      have_last = true;
      taken += need;
    }
    __syncwarp();
    emit_sorted(tmp, k, start, eid, lane, kWarp);
    __syncwarp();
  }
}

/// Weighted fill of the listed big nodes (more than kBigDegree edges), a block each: every
/// warp runs the race over its share of the edges, warp 0 merges the warps' lists.
template <typename W>
__global__ void __launch_bounds__(kBigFillThreads)
    fill_big_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                    const std::int64_t* deg_arr, const std::int64_t* npos_arr,
                    const std::int64_t* offsets, const std::int32_t* big_list,
                    const unsigned long long* big_count, int fanout,
                    const std::uint64_t* random_seed, int hop, W w, bool segmented,
                    std::int64_t* eid_all, std::int64_t* tmp_all) {
  constexpr int kWarps = kBigFillThreads / kWarp;
  using block_scan = cub::BlockScan<int, kBigFillThreads>;
  __shared__ race_entry lists[kWarps][kWarp];
  __shared__ race_entry round_last;
  __shared__ typename block_scan::TempStorage scan_storage;
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int k = fanout;
  const std::int64_t nbig = static_cast<std::int64_t>(*big_count);
  for (std::int64_t b = blockIdx.x; b < nbig; b += gridDim.x) {
    const std::int64_t i = big_list[b];
    const std::int64_t start = start_arr[i], deg = deg_arr[i], npos = npos_arr[i];
    std::int64_t* eid = eid_all + offsets[i];
    std::int64_t* tmp = tmp_all + offsets[i];
    if (npos <= k) {  // every positive-weight edge, ascending, a block-wide chunk at a time
      std::int64_t written = 0;
      for (std::int64_t base = 0; base < deg; base += kBigFillThreads) {
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
    const std::uint64_t key = d::node_key(*random_seed, hop, dst[i]);
    race_entry last{0.0, -1};
    bool have_last = false;
    for (std::int64_t taken = 0; taken < k;) {
      const std::int64_t left = k - taken;
      const int need = left < kWarp ? static_cast<int>(left) : kWarp;
      race_entry best = race_pass(key, i, start, deg, static_cast<std::int64_t>(warp) * kWarp,
                                  kBigFillThreads, need, have_last, last, w, nullptr, lane);
      lists[warp][lane] = best;
      __syncthreads();
      if (warp == 0) {
        for (int o = 1; o < kWarps; ++o) best = merge_lists(best, lists[o][lane], lane);
        if (lane < need) tmp[taken + lane] = best.i;
        const race_entry l = shfl_entry(best, need - 1);
        if (lane == 0) round_last = l;
      }
      __syncthreads();
      last = round_last;
      have_last = true;
      taken += need;
    }
    emit_sorted(tmp, k, start, eid, static_cast<int>(threadIdx.x), kBigFillThreads);
    __syncthreads();  // lists and round_last are reused by the next node
  }
}

/// Segments of listed big node j (0 past the list): the input of the segment offsets scan.
struct big_segments {
  const std::int32_t* big_list;
  const unsigned long long* big_count;
  const std::int64_t* deg;
  __host__ __device__ __forceinline__ std::int64_t operator()(std::int64_t j) const {
    if (j >= static_cast<std::int64_t>(*big_count)) return 0;
    return (deg[big_list[j]] + kSegment - 1) / kSegment;
  }
};

/// The race of big nodes (fanout 1 to 32) spread over blocks: block-iteration s takes segment
/// s (kSegment edges) of listed node j, where seg_base[j] <= s < seg_base[j + 1], and writes
/// the segment's 32 earliest race entries to cand[32 s ...].  Nodes with at most `fanout`
/// positive weights are fill_big_kernel's.
template <typename W>
__global__ void __launch_bounds__(kBigFillThreads)
    race_segments_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                         const std::int64_t* deg_arr, const std::int64_t* npos_arr,
                         const std::int32_t* big_list, const unsigned long long* big_count,
                         const std::int64_t* seg_base, int fanout, const std::uint64_t* random_seed,
                         int hop, W w, race_entry* cand) {
  constexpr int kWarps = kBigFillThreads / kWarp;
  __shared__ race_entry lists[kWarps][kWarp];
  __shared__ unsigned long long segment_bar;
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
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
    const std::int64_t seg_lo = (s - seg_base[lo]) * kSegment;
    const std::int64_t seg_hi = seg_lo + kSegment < deg_arr[i] ? seg_lo + kSegment : deg_arr[i];
    const std::uint64_t key = d::node_key(*random_seed, hop, dst[i]);
    if (threadIdx.x == 0) segment_bar = 0x7ff0000000000000ull;  // +infinity
    __syncthreads();
    race_entry best = race_pass(key, i, start, seg_hi, seg_lo + warp * kWarp, kBigFillThreads,
                                fanout, false, no_last, w, &segment_bar, lane);
    lists[warp][lane] = best;
    __syncthreads();
    if (warp == 0) {
      for (int o = 1; o < kWarps; ++o) best = merge_lists(best, lists[o][lane], lane);
      cand[s * kWarp + lane] = best;
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
  const int lane = threadIdx.x % kWarp;
  const std::int64_t nbig = static_cast<std::int64_t>(*big_count);
  for (std::int64_t j = thread_id() / kWarp; j < nbig; j += thread_count() / kWarp) {
    const std::int64_t i = big_list[j];
    if (npos_arr[i] <= fanout) continue;
    race_entry best = none_entry();
    for (std::int64_t s = seg_base[j]; s < seg_base[j + 1]; ++s) {
      best = merge_lists(best, cand[s * kWarp + lane], lane);
    }
    std::int64_t* tmp = tmp_all + offsets[i];
    if (lane < fanout) tmp[lane] = best.i;
    __syncwarp();
    emit_sorted(tmp, fanout, start_arr[i], eid_all + offsets[i], lane, kWarp);
    __syncwarp();
  }
}

/// fill_kernel for small fanouts of the uniform methods (0 <= fanout <= G): a tile of G
/// lanes per dst node instead of a warp, the same draws and the same order.
template <int G>
__global__ void fill_small_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                                  const std::int64_t* deg_arr, const std::int64_t* offsets,
                                  device_count n_dst, sample_method method, int fanout,
                                  const std::uint64_t* random_seed, int hop,
                                  std::int64_t* eid_all) {
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
    const std::uint64_t key = d::node_key(*random_seed, hop, dst[i]);
    if (method == sample_method::uniform_with_replacement) {
      if (deg == 0) continue;
      draw_with_replacement(key, deg, k, start, lane, G, eid);
      continue;
    }
    floyd_in_tile(tile, key, deg, k, start, eid);  // deg > k, k <= G
  }
}

/// The hop's table entries: entry x < n_dst is dst node x, entry n_dst + e the node id at edge
/// eids[e], read from col (or from `gathered` values, distributed memory), for e < *n_edges.
/// A node id outside [0, num_nodes) is recorded in `fault` and replaced by node 0.
template <typename K, typename ColGen>
__global__ void entry_insert_kernel(const std::int64_t* dst, const std::int64_t* eids,
                                    const std::int64_t* gathered, ColGen col, device_count n_dst,
                                    const std::int64_t* n_edges, key_table<K> table,
                                    std::uint32_t* slot, std::int64_t num_nodes, long long* fault) {
  const std::int64_t nd = n_dst.get();
  const std::int64_t total = nd + *n_edges;
  for (std::int64_t x = thread_id(); x < total; x += thread_count()) {
    std::int64_t id;
    if (x < nd) {
      id = dst[x];
    } else {
      id =
          gathered != nullptr ? gathered[x - nd] : static_cast<std::int64_t>(*col.At(eids[x - nd]));
      if (id < 0 || id >= num_nodes) {
        record_fault(fault, kFaultColumn, eids[x - nd]);
        id = 0;
      }
    }
    slot[x] = table_insert(table, static_cast<K>(id), static_cast<unsigned>(x));
  }
}

/// 1 for entry x when it is the first occurrence of a node that is not a dst node (x past
/// the entries: 0), the input of the new-node rank scan.
template <typename K>
struct new_node_flag {
  key_table<K> table;
  const std::uint32_t* slot;
  device_count n_dst;
  const std::int64_t* n_edges;  ///< null: no edges (hop 0: every entry counts from n_dst = 0)
  std::int64_t n_entries;       ///< entries when n_edges is null
  __host__ __device__ __forceinline__ std::int32_t operator()(std::int64_t x) const {
    const std::int64_t nd = n_dst.get();
    const std::int64_t total = n_edges != nullptr ? nd + *n_edges : n_entries;
    if (x < nd || x >= total) return 0;
    return table.first[slot[x]] == static_cast<unsigned>(x) ? 1 : 0;
  }
};

/// flags[x] = f(x) for x <= bound.
template <typename K>
__global__ void mark_new_kernel(new_node_flag<K> f, std::int64_t bound, std::int32_t* flags) {
  for (std::int64_t x = thread_id(); x <= bound; x += thread_count()) flags[x] = f(x);
}

/// Local ids: src_index (entries past n_dst; null for the seeds), src_nodes, the src count
/// (n_dst + new nodes, rank[bound]) in *num_src and the edge count in *edges_out.
template <typename K>
__global__ void assign_kernel(new_node_flag<K> f, const std::int32_t* rank, std::int64_t bound,
                              std::int32_t* src_index, std::int64_t* src_nodes, long long* num_src,
                              long long* edges_out) {
  const std::int64_t nd = f.n_dst.get();
  const std::int64_t ne = f.n_edges != nullptr ? *f.n_edges : f.n_entries;
  const std::int64_t total = nd + ne;
  if (thread_id() == 0) {
    *num_src = static_cast<long long>(nd + rank[bound]);
    if (edges_out != nullptr) *edges_out = static_cast<long long>(ne);
  }
  for (std::int64_t x = thread_id(); x < total; x += thread_count()) {
    const std::uint32_t s = f.slot[x];
    const std::int64_t first = f.table.first[s];
    const std::int64_t local = first < nd ? first : nd + rank[first];
    if (x >= nd && src_index != nullptr) src_index[x - nd] = static_cast<std::int32_t>(local);
    if (first == x) src_nodes[local] = static_cast<std::int64_t>(f.table.keys[s]);
  }
}

/// The number of weights in [0, n) that are not > 0 (NaN included), added to *out.
template <typename Gen>
__global__ void count_nonpositive_kernel(Gen w, std::int64_t n, unsigned long long* out) {
  unsigned long long c = 0;
  for (std::int64_t e = thread_id(); e < n; e += thread_count()) c += *w.At(e) > 0.0f ? 0 : 1;
  for (int o = kWarp / 2; o > 0; o /= 2) c += __shfl_xor_sync(kFull, c, o);
  if (threadIdx.x % kWarp == 0 && c > 0) atomicAdd(out, c);
}

/// The largest degree of rows [0, n) read through ro into out[0] (atomicMax), and the number
/// of rows above kBigDegree into out[1].  Rows outside [0, num_edges] count as empty (the
/// sampler reports them when it meets them).
template <typename Gen>
__global__ void degree_stats_kernel(Gen ro, std::int64_t n, std::int64_t num_edges,
                                    unsigned long long* out) {
  unsigned long long m = 0, big = 0;
  for (std::int64_t v = thread_id(); v < n; v += thread_count()) {
    const std::int64_t s = *ro.At(v), e = *ro.At(v + 1);
    const std::int64_t dg = row_in_bounds(s, e, num_edges) ? e - s : 0;
    if (static_cast<unsigned long long>(dg) > m) m = static_cast<unsigned long long>(dg);
    big += dg > kBigDegree ? 1 : 0;
  }
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const unsigned long long other = __shfl_xor_sync(kFull, m, o);
    m = other > m ? other : m;
    big += __shfl_xor_sync(kFull, big, o);
  }
  if (threadIdx.x % kWarp == 0) {
    atomicMax(out, m);
    atomicAdd(out + 1, big);
  }
}

}  // namespace wholestore::graph::gpu
