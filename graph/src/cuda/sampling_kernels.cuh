/*
 * Kernels of the GPU sampler (sampling_gpu.cu).  Internal.
 *
 * A hop runs: node_info (start and degree of every dst node), count (positions per node,
 * detail::max_sample_count, exact for weighted), an exclusive scan into the block's offsets,
 * fill (one warp per dst node, or a tile of 4, 8 or 16 lanes for small uniform fanouts, writes
 * the global edge ids of its sampled positions), then the relabel of (dst nodes, sampled
 * neighbors) into src_nodes and src_index:
 *   keys      = node ids of the entries (dst nodes, then neighbors in edge order), values =
 *               their positions;
 *   radix sort by id over the bits num_nodes needs (stable: in each run of equal ids the first
 *               value is the first occurrence);
 *   mark_heads: new_flag[first position of every run] = 1 when that position is a neighbor
 *               (dst nodes keep their own index); head_index = index of the run start;
 *   inclusive max scan of head_index, exclusive sum of new_flag (new nodes in order of first
 *               position);
 *   assign:     local id of every entry, written to src_index, and src_nodes by run heads.
 */
#pragma once

#include <graph/detail/sample_select.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace wholestore::graph::gpu {

namespace d = ::wholestore::graph::detail;

constexpr int kWarp = 32;
constexpr unsigned kFull = 0xffffffffu;

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

/// Hop 0 entries: the seeds.  Records the first out-of-range position with atomicMin.
template <typename K>
__global__ void seed_keys_kernel(const std::int64_t* seeds, std::int64_t n, std::int64_t num_nodes,
                                 K* keys, std::int32_t* values, unsigned long long* bad_pos) {
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  std::int64_t s = seeds[i];
  if (s < 0 || s >= num_nodes) {
    atomicMin(bad_pos, static_cast<unsigned long long>(i));
    s = 0;  // harmless key; the call throws before anything reads the graph
  }
  keys[i] = static_cast<K>(s);
  values[i] = static_cast<std::int32_t>(i);
}

/// The number of dst nodes: *live when given (known on the device only; `bound` is an upper
/// bound of it), else `bound`.
__device__ __forceinline__ std::int64_t live_count(std::int64_t bound, const long long* live) {
  return live != nullptr ? static_cast<std::int64_t>(*live) : bound;
}

/// start and degree of every dst node, reading row_offsets through `ro`.
template <typename RoGen>
__global__ void node_info_kernel(const std::int64_t* dst, std::int64_t bound, const long long* live,
                                 RoGen ro, std::int64_t* start, std::int64_t* deg) {
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound || i >= live_count(bound, live)) return;
  std::int64_t v = dst[i];
  std::int64_t s = *ro.At(v);
  std::int64_t e = *ro.At(v + 1);
  start[i] = s;
  deg[i] = e - s;
}

/// The same from gathered row offsets: ro2[2i] = row_offsets[v], ro2[2i + 1] = row_offsets[v+1].
__global__ void node_info_gathered_kernel(const std::int64_t* ro2, std::int64_t n,
                                          std::int64_t* start, std::int64_t* deg) {
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  start[i] = ro2[2 * i];
  deg[i] = ro2[2 * i + 1] - ro2[2 * i];
}

/// Index list for gathering row_offsets at v and v + 1 of every dst node.
__global__ void row_index_kernel(const std::int64_t* dst, std::int64_t n, std::int64_t* idx) {
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  idx[2 * i] = dst[i];
  idx[2 * i + 1] = dst[i] + 1;
}

/// counts[i] for i < n, 0 for n <= i <= bound (so that the exclusive scan over bound + 1 items
/// holds the offsets and then the total).
__global__ void count_kernel(const std::int64_t* deg, std::int64_t bound, const long long* live,
                             sample_method m, int fanout, std::int64_t* counts) {
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i > bound) return;
  counts[i] = i >= live_count(bound, live) ? 0 : d::max_sample_count(m, deg[i], fanout);
}

/// Weighted counts (fanout >= 0): one warp per node counts the positive weights.
template <typename W>
__global__ void count_weighted_kernel(const std::int64_t* start, const std::int64_t* deg,
                                      std::int64_t bound, const long long* live, int fanout, W w,
                                      std::int64_t* counts, std::int64_t* npos) {
  const int lane = threadIdx.x % kWarp;
  std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (i > bound) return;  // whole warps leave together
  if (i >= live_count(bound, live)) {
    if (lane == 0) counts[i] = 0;
    return;
  }
  const std::int64_t s = start[i], dg = deg[i];
  std::int64_t c = 0;
  for (std::int64_t p = lane; p < dg; p += kWarp) c += w(i, s, p) > 0.0f ? 1 : 0;
  for (int o = kWarp / 2; o > 0; o /= 2) c += __shfl_xor_sync(kFull, c, o);
  if (lane == 0) {
    npos[i] = c;
    counts[i] = c < fanout ? c : fanout;
  }
}

/// Edge ids of every position of the frontier (gathering weights of distributed memory).
__global__ void frontier_edges_kernel(const std::int64_t* start, const std::int64_t* deg,
                                      const std::int64_t* base, std::int64_t n, std::int64_t* out) {
  const int lane = threadIdx.x % kWarp;
  std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (i >= n) return;
  const std::int64_t s = start[i], dg = deg[i], b = base[i];
  for (std::int64_t p = lane; p < dg; p += kWarp) out[b + p] = s + p;
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

/// Writes `count` global edge ids for the ascending-ordered ranks of the `count` distinct
/// positions in tmp[0, count) (one warp).
__device__ __forceinline__ void emit_sorted(const std::int64_t* tmp, std::int64_t count,
                                            std::int64_t start, std::int64_t* eid, int lane) {
  for (std::int64_t a = lane; a < count; a += kWarp) {
    const std::int64_t v = tmp[a];
    std::int64_t rank = 0;
    for (std::int64_t b = 0; b < count; ++b) rank += tmp[b] < v ? 1 : 0;
    eid[rank] = start + v;
  }
}

/// One warp per dst node: the global edge ids of its sampled positions, in the method's order,
/// at eid[offsets[i] ...].  tmp (same indexing) holds positions for the paths that sort through
/// memory.  W reads weights (weighted only).
template <typename W>
__global__ void fill_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                            const std::int64_t* deg_arr, const std::int64_t* npos_arr,
                            const std::int64_t* offsets, std::int64_t n, sample_method method,
                            int fanout, std::uint64_t random_seed, int hop, W w,
                            std::int64_t* eid_all, std::int64_t* tmp_all) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (i >= n) return;  // whole warps leave together: every shuffle below has all 32 lanes
  const std::int64_t start = start_arr[i], deg = deg_arr[i], off = offsets[i];
  std::int64_t* eid = eid_all + off;
  std::int64_t* tmp = tmp_all + off;
  const int k = fanout;
  const std::uint64_t key = d::node_key(random_seed, hop, dst[i]);

  if (k < 0 || (method == sample_method::uniform && deg <= k)) {
    for (std::int64_t p = lane; p < deg; p += kWarp) eid[p] = start + p;
    return;
  }
  if (method == sample_method::uniform_with_replacement) {
    if (deg == 0) return;
    for (int c = lane; c < k; c += kWarp) {
      eid[c] = start +
               static_cast<std::int64_t>(d::rand_below(d::draw(key, static_cast<std::uint64_t>(c)),
                                                       static_cast<std::uint64_t>(deg)));
    }
    return;
  }
  if (method == sample_method::uniform) {
    // Floyd, deg > k >= 0.  Lane c draws t_c for j_c = deg - k + c at once; the results are
    // then resolved in order: r_c = j_c when t_c equals an earlier result, else t_c.
    if (k <= kWarp) {
      const bool active = lane < k;
      const std::int64_t j = deg - k + lane;
      const std::int64_t t = active ? static_cast<std::int64_t>(d::rand_below(
                                          d::draw(key, static_cast<std::uint64_t>(lane)),
                                          static_cast<std::uint64_t>(j + 1)))
                                    : -1;
      bool seen = false;
      std::int64_t r = -1;
      for (int c = 0; c < k; ++c) {
        const std::int64_t rc = __shfl_sync(kFull, seen ? j : t, c);
        if (lane == c) r = rc;
        if (lane > c) seen |= (t == rc);
      }
      int rank = 0;
      for (int c = 0; c < k; ++c) rank += __shfl_sync(kFull, r, c) < r ? 1 : 0;
      if (active) eid[rank] = start + r;
      return;
    }
    for (int base = 0; base < k; base += kWarp) {
      const int c = base + lane;
      const bool active = c < k;
      const std::int64_t j = deg - k + c;
      const std::int64_t t =
          active
              ? static_cast<std::int64_t>(d::rand_below(d::draw(key, static_cast<std::uint64_t>(c)),
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
    emit_sorted(tmp, k, start, eid, lane);
    return;
  }
  // Weighted, k >= 0.
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
    return;
  }
  // The k smallest race times, 32 per round: each round keeps the 32 smallest entries that
  // come after the last one taken (bitonic sort of each chunk of 32 edges, merged into the
  // running best 32).
  race_entry last{0.0, -1};
  bool have_last = false;
  for (std::int64_t taken = 0; taken < k;) {
    race_entry best = none_entry();
    race_entry worst = none_entry();  // best of lane 31, the bar a chunk must beat
    for (std::int64_t b = 0; b < deg; b += kWarp) {
      const std::int64_t p = b + lane;
      race_entry e = none_entry();
      if (p < deg) {
        const double rt = d::race_time(key, p, w(i, start, p));
        if (rt >= 0.0) {
          race_entry c{rt, p};
          if (!have_last || before(last, c)) e = c;
        }
      }
      if (__ballot_sync(kFull, before(e, worst)) == 0) continue;
      e = warp_sort(e, lane);
      race_entry rev = shfl_entry(e, kWarp - 1 - lane);
      if (before(rev, best)) best = rev;  // bitonic: the 32 smallest of both
      best = warp_merge(best, lane);
      worst = shfl_entry(best, kWarp - 1);
    }
    const std::int64_t left = k - taken;
    const int need = left < kWarp ? static_cast<int>(left) : kWarp;
    if (lane < need) tmp[taken + lane] = best.i;
    last = shfl_entry(best, need - 1);
    have_last = true;
    taken += need;
  }
  __syncwarp();
  emit_sorted(tmp, k, start, eid, lane);
}

/// fill_kernel for small fanouts of the uniform methods (0 <= fanout <= G): a tile of G
/// lanes per dst node instead of a warp, the same draws and the same order.
template <int G>
__global__ void fill_small_kernel(const std::int64_t* dst, const std::int64_t* start_arr,
                                  const std::int64_t* deg_arr, const std::int64_t* offsets,
                                  std::int64_t n, sample_method method, int fanout,
                                  std::uint64_t random_seed, int hop, std::int64_t* eid_all) {
  namespace cg = cooperative_groups;
  const cg::thread_block_tile<G> tile = cg::tiled_partition<G>(cg::this_thread_block());
  const int lane = static_cast<int>(tile.thread_rank());
  const std::int64_t i = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  if (i >= n) return;  // whole tiles leave together
  const std::int64_t start = start_arr[i], deg = deg_arr[i];
  std::int64_t* eid = eid_all + offsets[i];
  const int k = fanout;
  if (method == sample_method::uniform && deg <= k) {
    for (std::int64_t p = lane; p < deg; p += G) eid[p] = start + p;
    return;
  }
  const std::uint64_t key = d::node_key(random_seed, hop, dst[i]);
  if (method == sample_method::uniform_with_replacement) {
    if (deg == 0) return;
    for (int c = lane; c < k; c += G) {
      eid[c] = start +
               static_cast<std::int64_t>(d::rand_below(d::draw(key, static_cast<std::uint64_t>(c)),
                                                       static_cast<std::uint64_t>(deg)));
    }
    return;
  }
  // Floyd, deg > k, k <= G: as fill_kernel's register path.
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

/// Relabel entries of a hop: keys = dst ids (positions < n_dst), then the neighbors' ids read
/// from col at the edge ids (or from gathered values when `gathered` is set).
template <typename ColGen, typename K>
__global__ void hop_keys_kernel(const std::int64_t* dst, std::int64_t n_dst,
                                const std::int64_t* eid, const std::int64_t* gathered, ColGen col,
                                std::int64_t total, K* keys, std::int32_t* values) {
  std::int64_t x = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= total) return;
  std::int64_t id;
  if (x < n_dst) {
    id = dst[x];
  } else if (gathered != nullptr) {
    id = gathered[x - n_dst];
  } else {
    id = static_cast<std::int64_t>(*col.At(eid[x - n_dst]));
  }
  keys[x] = static_cast<K>(id);
  values[x] = static_cast<std::int32_t>(x);
}

template <typename K>
__global__ void mark_heads_kernel(const K* keys, const std::int32_t* values, std::int64_t total,
                                  std::int64_t n_dst, std::int32_t* new_flag,
                                  std::int32_t* head_index) {
  std::int64_t x = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= total) return;
  const bool head = x == 0 || keys[x] != keys[x - 1];
  const std::int32_t pos = values[x];
  new_flag[pos] = (head && pos >= n_dst) ? 1 : 0;
  head_index[x] = head ? static_cast<std::int32_t>(x) : 0;
}

struct max_op {
  __device__ __forceinline__ std::int32_t operator()(std::int32_t a, std::int32_t b) const {
    return a > b ? a : b;
  }
};

/// Local ids: src_index (entries past n_dst; may be null for the seeds), src_nodes, and the
/// number of src nodes in *num_src.
template <typename K>
__global__ void assign_kernel(const K* keys, const std::int32_t* values,
                              const std::int32_t* head_of, const std::int32_t* new_flag,
                              const std::int32_t* new_rank, std::int64_t total, std::int64_t n_dst,
                              std::int32_t* src_index, std::int64_t* src_nodes,
                              long long* num_src) {
  std::int64_t x = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= total) return;
  const std::int32_t h = head_of[x];
  const std::int64_t first = values[h];
  const std::int64_t local = first < n_dst ? first : n_dst + new_rank[first];
  const std::int64_t pos = values[x];
  if (pos >= n_dst && src_index != nullptr) {
    src_index[pos - n_dst] = static_cast<std::int32_t>(local);
  }
  if (h == x) src_nodes[local] = static_cast<std::int64_t>(keys[x]);
  if (x == total - 1) {
    *num_src = static_cast<long long>(n_dst + new_rank[total - 1] + new_flag[total - 1]);
  }
}

}  // namespace wholestore::graph::gpu
