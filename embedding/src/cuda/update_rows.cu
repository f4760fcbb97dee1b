// The owner side of the GPU apply_gradients (update_rows.hpp).  No host wait: every launch is
// sized by bounds known from the entry count, and the kernels read the counts they need from
// the device.
//
//   1. runs: select the positions that start a run of equal rows (CUB DeviceSelect::If)
//   2. long runs (more than sum_fan_in entries): listed in slots with their length and first
//      entry
//   3. tree layout: the partial rows a long run gets at each level are a function of its
//      length alone (level l sums groups of sum_fan_in of level l - 1's rows), so one kernel
//      counts them for every (level, slot) and one exclusive scan, level-major, places them:
//      the scan of (level l, slot i) is the first partial row of run i at level l
//   4. tree levels, as many as a run of every entry would need: every chunk of sum_fan_in
//      consecutive items of a long run is summed left to right by one warp into a partial row.
//      A hot row with 100k duplicates is summed by ~3k warps at the first level instead of one;
//      a level with nothing to sum returns at once.
//   5. update: one warp per run sums its at most sum_fan_in items left to right (entries of a
//      short run, the last level's partial rows of a long one), applies weight decay and the
//      optimizer through the element function the CPU path uses
//      (embedding/detail/optimizer_update.hpp), and writes the row.  Only the owner writes its
//      rows: no atomics on data.
// The tree is a fixed function of the run's length, so the sum is the same bits whatever the
// number of warps, threads or ranks, and the CPU path computes the same tree.  With a gate
// (update_rows_args::gate) the sums and the update do nothing once the gate word is set.
#include "../dispatch.hpp"
#include "update_rows.hpp"

#include <wholememory/convert.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

namespace wholestore::embedding::detail {
namespace {

constexpr int block_threads = 256;
constexpr int warps_per_block = block_threads / 32;
constexpr unsigned full_mask = 0xffffffffu;
/// Columns a lane holds in registers per pass over a row (lane l: l, l + 32, l + 64, l + 96).
constexpr int lane_cols = 4;
constexpr std::uint32_t fan_in = static_cast<std::uint32_t>(sum_fan_in);
constexpr std::size_t max_blocks = std::size_t{1} << 20;

unsigned blocks_for_threads(std::size_t n) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + block_threads - 1) / block_threads, 1, max_blocks));
}
unsigned blocks_for_warps(std::size_t warps) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((warps + warps_per_block - 1) / warps_per_block, 1, max_blocks));
}

template <typename T>
T* reserve(wholememory::device_buffer& b, std::size_t count, int device) {
  return static_cast<T*>(b.reserve_discard(std::max<std::size_t>(count, 1) * sizeof(T), device));
}

__device__ __forceinline__ std::size_t global_thread() {
  return static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_stride() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}
__device__ __forceinline__ std::size_t global_warp() { return global_thread() / 32; }
__device__ __forceinline__ std::size_t warp_stride() { return thread_stride() / 32; }

/// Where the items of a sum are: entries of the sorted list (row order[q] of grads, or the
/// product coefs[order[q]] * source row source_rows[order[q]] for the scaled form) or partial
/// rows of the tree (row q of partials).
struct item_source {
  const float* base;
  std::size_t stride;
  const std::uint32_t* order;    // nullptr: item q is row q
  const float* coefs = nullptr;  // set: the scaled form (base unused)
  const std::uint64_t* source_rows = nullptr;
  table_view source{};
  // Set: entry e's row is in sender e >> slot_shift's buffer, at row e & (2^slot_shift - 1)
  // (rows read where the senders wrote them: update_rows_args::sender_rows).
  const float* const* sender_rows = nullptr;
  int slot_shift = 0;

  /// One item: a row and, for the scaled form, the factor every element is multiplied by.
  struct item {
    const float* row;
    float coef;
  };

  __device__ __forceinline__ item at(std::size_t q) const {
    const std::size_t e = order != nullptr ? static_cast<std::size_t>(order[q]) : q;
    if (coefs == nullptr) {
      if (sender_rows != nullptr) {
        const std::size_t slot = e & ((std::size_t{1} << slot_shift) - 1);
        return item{sender_rows[e >> slot_shift] + slot * stride, 1.0f};
      }
      return item{base + e * stride, 1.0f};
    }
    return item{source.row<float>(static_cast<std::size_t>(source_rows[e])), coefs[e]};
  }
  /// Element c of an item.  The scaled form rounds the product once and never fuses it into
  /// the sum that follows (__fmul_rn): the same bits as the materialized row coef * u[c].
  __device__ __forceinline__ float element(const item& it, std::size_t c) const {
    return coefs != nullptr ? __fmul_rn(it.coef, it.row[c]) : it.row[c];
  }
  __device__ __forceinline__ float4 quad(const item& it, std::size_t q) const {
    float4 x = reinterpret_cast<const float4*>(it.row)[q];
    if (coefs != nullptr) {
      x.x = __fmul_rn(it.coef, x.x);
      x.y = __fmul_rn(it.coef, x.y);
      x.z = __fmul_rn(it.coef, x.z);
      x.w = __fmul_rn(it.coef, x.w);
    }
    return x;
  }
};

/// The items of the sorted entries as `a` gives them (materialized or scaled rows).
__host__ __device__ inline item_source entries_of(const update_rows_args& a) {
  item_source s{a.grads, a.grad_stride, a.order};
  s.sender_rows = a.sender_rows;
  s.slot_shift = a.slot_shift;
  if (a.grads == nullptr) {
    s.coefs = a.scaled.coefs;
    s.source_rows = a.scaled.source_rows;
    s.source = a.scaled.source;
  }
  return s;
}

/// acc[v] = column c0 + 32 v summed over items [first, first + count), left to right from the
/// first item (columns at or past dim are left alone).
__device__ __forceinline__ void sum_items(const item_source& s, std::size_t first,
                                          std::uint32_t count, std::size_t c0, std::size_t dim,
                                          float (&acc)[lane_cols]) {
  item_source::item it = s.at(first);
#pragma unroll
  for (int v = 0; v < lane_cols; ++v) {
    const std::size_t c = c0 + 32 * v;
    if (c < dim) acc[v] = s.element(it, c);
  }
#pragma unroll 4
  for (std::uint32_t j = 1; j < count; ++j) {
    it = s.at(first + j);
#pragma unroll
    for (int v = 0; v < lane_cols; ++v) {
      const std::size_t c = c0 + 32 * v;
      if (c < dim) acc[v] = acc[v] + s.element(it, c);
    }
  }
}

/// Quad q (columns 4q .. 4q + 3) of items [first, first + count) summed left to right from the
/// first item, for the float4 paths: every lane of the warp calls (the shuffles need them
/// all), lanes with `active` false get nothing.  The items' rows and factors are found by the
/// lanes at once (lane i: item i of each group of 32; for the scaled form a chain of three
/// dependent loads each), then handed round, so the rows' loads never wait for each item's
/// lookup in turn.  Every element sees the scalar path's additions in the same order.
__device__ __forceinline__ float4 sum_quads(const item_source& src, std::size_t first,
                                            std::uint32_t count, std::size_t q, bool active,
                                            int lane) {
  float4 g{};
  for (std::uint32_t base = 0; base < count; base += 32) {
    const std::uint32_t n = count - base < 32 ? count - base : 32;
    item_source::item mine{nullptr, 1.0f};
    if (static_cast<std::uint32_t>(lane) < n) mine = src.at(first + base + lane);
    const auto mine_row = reinterpret_cast<unsigned long long>(mine.row);
#pragma unroll 8
    for (std::uint32_t j = 0; j < n; ++j) {
      const item_source::item it{
          reinterpret_cast<const float*>(__shfl_sync(full_mask, mine_row, static_cast<int>(j))),
          __shfl_sync(full_mask, mine.coef, static_cast<int>(j))};
      if (!active) continue;
      const float4 x = src.quad(it, q);
      if (base + j == 0) {
        g = x;
      } else {
        g.x = g.x + x.x;
        g.y = g.y + x.y;
        g.z = g.z + x.z;
        g.w = g.w + x.w;
      }
    }
  }
  return g;
}

/// Selects sorted position k when it starts a run (the select's input is 0, 1, ..., m - 1).
struct starts_run {
  const std::uint32_t* rows;
  __device__ __forceinline__ bool operator()(std::uint32_t k) const {
    return k == 0 || rows[k] != rows[k - 1];
  }
};

__device__ __forceinline__ std::uint32_t run_end(const std::uint32_t* run_start, std::uint32_t r,
                                                 std::uint32_t runs, std::size_t m) {
  return r + 1 < runs ? run_start[r + 1] : static_cast<std::uint32_t>(m);
}

/// Whether the gate word (or none) stops the sums and the update: any value but ~0.
__device__ __forceinline__ bool gated(const unsigned long long* gate) {
  return gate != nullptr && *gate != ~0ull;
}

/// Items a long run of `len` entries has at tree level `level` (level 0: its entries; level
/// l + 1: the partial rows level l made of them).
__host__ __device__ __forceinline__ std::uint32_t items_at_level(std::uint32_t len, int level) {
  for (int l = 0; l < level; ++l) len = (len + fan_in - 1) / fan_in;
  return len;
}

/// counters[0] = runs; lists the runs longer than fan_in in counters[1] slots as (length,
/// first entry) (slot order is immaterial: a slot only says where a run's partial rows go,
/// never how they are summed).
__global__ void find_long_runs(const std::uint32_t* run_start, std::size_t m,
                               std::uint32_t* counters, uint2* long_state,
                               std::uint32_t* long_of_run) {
  const std::uint32_t runs = counters[0];
  for (std::size_t r = global_thread(); r < runs; r += thread_stride()) {
    const std::uint32_t begin = run_start[r];
    const std::uint32_t len = run_end(run_start, static_cast<std::uint32_t>(r), runs, m) - begin;
    if (len > fan_in) {
      const std::uint32_t slot = atomicAdd(&counters[1], 1u);
      long_state[slot] = make_uint2(len, begin);
      long_of_run[r] = slot;
    }
  }
}

/// chunks[l * slots + i]: the partial rows long run i makes at level l (0 once it has at most
/// fan_in items there, and for every unused slot), for levels [0, levels).
__global__ void count_chunks(const uint2* long_state, const std::uint32_t* counters,
                             std::size_t slots, int levels, std::uint32_t* chunks) {
  const std::uint32_t long_runs = counters[1];
  const std::size_t total = slots * static_cast<std::size_t>(levels);
  for (std::size_t k = global_thread(); k < total; k += thread_stride()) {
    const std::size_t i = k % slots;
    std::uint32_t c = 0;
    if (i < long_runs) {
      const std::uint32_t items = items_at_level(long_state[i].x, static_cast<int>(k / slots));
      if (items > fan_in) c = (items + fan_in - 1) / fan_in;
    }
    chunks[k] = c;
  }
}

/// One warp per chunk of level `level`: partial row chunk_begin[level * slots + i] + j = items
/// [j * fan_in, (j + 1) * fan_in) of long run i at that level, summed left to right.
__global__ void __launch_bounds__(block_threads)
    sum_chunks(item_source entries, float* partials, std::size_t dim, const uint2* long_state,
               const std::uint32_t* chunks, const std::uint32_t* chunk_begin, std::size_t slots,
               int level, bool vec4, const unsigned long long* gate) {
  if (gated(gate)) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::size_t seg = static_cast<std::size_t>(level) * slots, last = seg + slots - 1;
  const std::uint32_t first_row = chunk_begin[seg];
  const std::uint32_t rows = chunk_begin[last] + chunks[last] - first_row;
  for (std::size_t t = global_warp(); t < rows; t += warp_stride()) {
    const std::uint32_t row = first_row + static_cast<std::uint32_t>(t);
    // The last slot whose first chunk is at or before `row` (slots without chunks share starts
    // with the next slot that has some).
    std::size_t lo = seg, hi = last;
    while (lo < hi) {
      const std::size_t mid = (lo + hi + 1) / 2;
      if (chunk_begin[mid] <= row) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const std::uint32_t j = row - chunk_begin[lo];
    const std::size_t i = lo - seg;
    // This level's items of run i: its entries, or the partial rows of the level before.
    item_source src = entries;
    std::size_t first = long_state[i].y;
    std::uint32_t items = long_state[i].x;
    if (level > 0) {
      src = item_source{partials, dim, nullptr};
      first = chunk_begin[lo - slots];
      items = chunks[lo - slots];
    }
    const std::uint32_t count = min(fan_in, items - j * fan_in);
    first += static_cast<std::size_t>(j) * fan_in;
    float* out = partials + static_cast<std::size_t>(row) * dim;
    if (vec4) {
      const std::size_t quads = dim / 4;
      for (std::size_t q0 = 0; q0 < quads; q0 += 32) {
        const std::size_t q = q0 + static_cast<std::size_t>(lane);
        const bool active = q < quads;
        const float4 g = sum_quads(src, first, count, q, active, lane);
        if (active) reinterpret_cast<float4*>(out)[q] = g;
      }
      continue;
    }
    for (std::size_t c0 = lane; c0 < dim; c0 += 32 * lane_cols) {
      float acc[lane_cols];
      sum_items(src, first, count, c0, dim, acc);
#pragma unroll
      for (int v = 0; v < lane_cols; ++v) {
        const std::size_t c = c0 + 32 * v;
        if (c < dim) out[c] = acc[v];
      }
    }
  }
}

struct run_tables {
  const std::uint32_t* run_start;
  const std::uint32_t* counters;
  const uint2* long_state;
  const std::uint32_t* long_of_run;
  const std::uint32_t* chunks;  // level-major, `slots` per level
  const std::uint32_t* chunk_begin;
  std::size_t slots;
  const float* partials;
};

/// The float32-table path of the element-wise optimizers when every row and the gradient
/// rows are 16-byte aligned: lane l takes the four columns 4 (l + 32 p), ... of each pass, one
/// float4 load per array.  Every element still sees the same operations in the same order as
/// in the scalar path (the run's items left to right, then the element function), so the bits
/// are the same; only which lane computes which element differs.
template <optimizer_kind Kind>
__device__ __forceinline__ void update_row_vec4(const update_rows_args& a, const item_source& src,
                                                std::size_t first, std::uint32_t count,
                                                std::size_t local, int lane) {
  const std::size_t quads = a.dim / 4;
  auto* w = reinterpret_cast<float4*>(static_cast<float*>(a.weights) + local * a.dim);
  float4* s0 = nullptr;
  float4* s1 = nullptr;
  if constexpr (Kind != optimizer_kind::sgd)
    s0 = reinterpret_cast<float4*>(a.state0 + local * a.dim);
  if constexpr (Kind == optimizer_kind::adam)
    s1 = reinterpret_cast<float4*>(a.state1 + local * a.dim);
  // Passes of 32 quads, every lane in each (the shuffles below need the whole warp).
  for (std::size_t q0 = 0; q0 < quads; q0 += 32) {
    const std::size_t q = q0 + static_cast<std::size_t>(lane);
    const bool active = q < quads;
    const float4 g = sum_quads(src, first, count, q, active, lane);
    if (!active) continue;
    float4 wv = w[q];
    float4 e0{}, e1{};
    if constexpr (Kind != optimizer_kind::sgd) e0 = s0[q];
    if constexpr (Kind == optimizer_kind::adam) e1 = s1[q];
    float* wp = &wv.x;
    const float* gp = &g.x;
    float* e0p = &e0.x;
    float* e1p = &e1.x;
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      const float gd = apply_weight_decay(a.params, gp[v], wp[v]);
      wp[v] =
          update_element<Kind>(a.params, wp[v], gd, Kind != optimizer_kind::sgd ? e0p + v : nullptr,
                               Kind == optimizer_kind::adam ? e1p + v : nullptr, 0.0f);
    }
    w[q] = wv;
    if constexpr (Kind != optimizer_kind::sgd) s0[q] = e0;
    if constexpr (Kind == optimizer_kind::adam) s1[q] = e1;
  }
}

template <typename TableT, optimizer_kind Kind>
__global__ void __launch_bounds__(block_threads)
    update_rows_kernel(const update_rows_args a, const run_tables rt) {
  if (gated(a.gate)) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::uint32_t runs = rt.counters[0];
  for (std::size_t r = global_warp(); r < runs; r += warp_stride()) {
    const std::uint32_t begin = rt.run_start[r];
    const std::uint32_t len =
        run_end(rt.run_start, static_cast<std::uint32_t>(r), runs, a.m) - begin;
    item_source src = entries_of(a);
    std::size_t first = begin;
    std::uint32_t count = len;
    if (len > fan_in) {
      // The last level's partial rows: the level before the run's items fit one sum.
      int level = 0;
      while (items_at_level(len, level + 1) > fan_in) ++level;
      const std::size_t k = static_cast<std::size_t>(level) * rt.slots + rt.long_of_run[r];
      src = item_source{rt.partials, a.dim, nullptr};
      first = rt.chunk_begin[k];
      count = rt.chunks[k];
    }
    const std::size_t local = a.sorted_rows[begin];
    if constexpr (std::is_same_v<TableT, float> && Kind != optimizer_kind::rowwise_adagrad) {
      if (a.vec4) {
        update_row_vec4<Kind>(a, src, first, count, local, lane);
        continue;
      }
    }
    TableT* w = static_cast<TableT*>(a.weights) + local * a.dim;
    float row_state = 0.0f;
    if constexpr (Kind == optimizer_kind::rowwise_adagrad) {
      float partial = 0.0f;
      for (std::size_t c0 = lane; c0 < a.dim; c0 += 32 * lane_cols) {
        float g[lane_cols];
        sum_items(src, first, count, c0, a.dim, g);
#pragma unroll
        for (int v = 0; v < lane_cols; ++v) {
          const std::size_t c = c0 + 32 * v;
          if (c < a.dim) {
            const float gd =
                apply_weight_decay(a.params, g[v], wholememory::convert_element<float>(w[c]));
            partial = partial + gd * gd;
          }
        }
      }
      for (int off = 16; off >= 1; off /= 2)
        partial = partial + __shfl_xor_sync(full_mask, partial, off);
      const float total = __shfl_sync(full_mask, partial, 0);
      row_state = rowwise_state(a.state0[local], total, a.dim);
      __syncwarp();
      if (lane == 0) a.state0[local] = row_state;
    }
    for (std::size_t c0 = lane; c0 < a.dim; c0 += 32 * lane_cols) {
      float g[lane_cols];
      sum_items(src, first, count, c0, a.dim, g);
#pragma unroll
      for (int v = 0; v < lane_cols; ++v) {
        const std::size_t c = c0 + 32 * v;
        if (c >= a.dim) continue;
        const float wf = wholememory::convert_element<float>(w[c]);
        const float gd = apply_weight_decay(a.params, g[v], wf);
        float* e0 = nullptr;
        float* e1 = nullptr;
        if constexpr (Kind != optimizer_kind::sgd && Kind != optimizer_kind::rowwise_adagrad) {
          e0 = a.state0 + local * a.dim + c;
        }
        if constexpr (Kind == optimizer_kind::adam) e1 = a.state1 + local * a.dim + c;
        w[c] = wholememory::convert_element<TableT>(
            update_element<Kind>(a.params, wf, gd, e0, e1, row_state));
      }
    }
  }
}

/// The most partial rows each tree level can make over m entries, one bound per level that a
/// run of all m entries would need (no run needs more levels): at level l a run has more than
/// fan_in items only if it is longer than fan_in^(l + 1) (at most m / (fan_in^(l + 1) + 1)
/// such runs), and makes at most items / fan_in + 1 rows from the level's items.
std::vector<std::size_t> level_row_bounds(std::size_t m) {
  std::vector<std::size_t> bounds;
  std::size_t items = m, span = fan_in;
  for (std::size_t longest = m; longest > fan_in; longest = (longest + fan_in - 1) / fan_in) {
    bounds.push_back((items + fan_in - 1) / fan_in + m / (span + 1));
    items = bounds.back();
    span = span > m ? span : span * fan_in;
  }
  return bounds;
}

/// Blocks that keep every SM busy for a grid-stride kernel (one block of block_threads per
/// 256 threads an SM can hold), at most `wanted`.
unsigned resident_blocks(unsigned wanted, int device, runs_workspace& ws) {
  if (ws.sm_count == 0) {
    int sms = 0, threads = 0;
    WM_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    WM_CUDA_TRY(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    ws.sm_count = sms;
    ws.blocks_per_sm = std::max(1, threads / block_threads);
  }
  const auto resident = static_cast<unsigned>(ws.sm_count * ws.blocks_per_sm);
  return std::min(wanted, resident);
}

}  // namespace

void launch_update_rows(wholememory::dtype table_type, optimizer_kind kind,
                        const update_rows_args& a, runs_workspace& ws, int device,
                        cudaStream_t stream) {
  const std::size_t m = a.m;
  if (m == 0) return;
  auto* run_start = reserve<std::uint32_t>(ws.run_start, m, device);
  auto* counters = reserve<std::uint32_t>(ws.counters, 2, device);
  // Slots for long runs: each has more than fan_in entries.
  const std::size_t slots = m / (fan_in + 1);
  auto* long_state = reserve<uint2>(ws.long_state, slots, device);
  auto* long_of_run = reserve<std::uint32_t>(ws.long_of_run, slots > 0 ? m : 0, device);
  WM_CUDA_TRY(cudaMemsetAsync(counters, 0, 2 * sizeof(std::uint32_t), stream));

  std::size_t select_bytes = 0;
  const starts_run pred{a.sorted_rows};
  WM_CUDA_TRY(cub::DeviceSelect::If(nullptr, select_bytes, a.positions, run_start, counters, m,
                                    pred, stream));
  void* temp = ws.temp.reserve_discard(std::max<std::size_t>(select_bytes, 1), device);
  WM_CUDA_TRY(
      cub::DeviceSelect::If(temp, select_bytes, a.positions, run_start, counters, m, pred, stream));

  // float4 access when every array's rows are 16-byte aligned (the partial rows are: dim % 4
  // == 0 and the buffer is aligned).
  const auto aligned16 = [](const void* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  };
  const bool entries_aligned =
      a.grads != nullptr ? a.grad_stride % 4 == 0 && aligned16(a.grads) : a.source_aligned16;
  const bool vec4 = a.dim % 4 == 0 && entries_aligned;
  run_tables rt{run_start, counters, long_state, long_of_run, nullptr, nullptr, slots, nullptr};
  if (slots > 0) {
    find_long_runs<<<blocks_for_threads(m), block_threads, 0, stream>>>(run_start, m, counters,
                                                                        long_state, long_of_run);
    WM_CUDA_CHECK_LAUNCH(stream);
    const std::vector<std::size_t> level_rows = level_row_bounds(m);
    const int levels = static_cast<int>(level_rows.size());
    const std::size_t cells = slots * level_rows.size();
    std::size_t bound = 0;
    for (std::size_t rows : level_rows) bound += rows;
    WM_EXPECTS(bound <= std::numeric_limits<std::uint32_t>::max() / 2,
               "apply_gradients: " << m << " entries need too many partial rows");
    auto* partials = reserve<float>(ws.partials, bound * a.dim, device);
    auto* chunks = reserve<std::uint32_t>(ws.chunks, cells, device);
    auto* chunk_begin = reserve<std::uint32_t>(ws.chunk_begin, cells, device);
    count_chunks<<<blocks_for_threads(cells), block_threads, 0, stream>>>(long_state, counters,
                                                                          slots, levels, chunks);
    WM_CUDA_CHECK_LAUNCH(stream);
    std::size_t scan_bytes = 0;
    WM_CUDA_TRY(
        cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, chunks, chunk_begin, cells, stream));
    temp = ws.temp.reserve_discard(std::max<std::size_t>(scan_bytes, 1), device);
    WM_CUDA_TRY(
        cub::DeviceScan::ExclusiveSum(temp, scan_bytes, chunks, chunk_begin, cells, stream));
    // Level l makes at most level_rows[l] rows; a grid-stride grid of resident blocks covers
    // them.
    for (int l = 0; l < levels; ++l) {
      sum_chunks<<<resident_blocks(blocks_for_warps(level_rows[l]), device, ws), block_threads, 0,
                   stream>>>(entries_of(a), partials, a.dim, long_state, chunks, chunk_begin, slots,
                             l, vec4 && aligned16(partials), a.gate);
      WM_CUDA_CHECK_LAUNCH(stream);
    }
    rt.chunks = chunks;
    rt.chunk_begin = chunk_begin;
    rt.partials = partials;
  }

  const unsigned blocks = resident_blocks(blocks_for_warps(m), device, ws);
  update_rows_args args = a;
  args.vec4 = vec4 && aligned16(a.weights) && (a.state0 == nullptr || aligned16(a.state0)) &&
              (a.state1 == nullptr || aligned16(a.state1)) &&
              (rt.partials == nullptr || aligned16(rt.partials));
  if (a.update_after != nullptr) WM_CUDA_TRY(cudaStreamWaitEvent(stream, a.update_after, 0));
  dispatch_float_type(table_type, "the table dtype", [&](auto tag) {
    using T = decltype(tag);
    dispatch_optimizer(kind, [&](auto k) {
      update_rows_kernel<T, decltype(k)::value><<<blocks, block_threads, 0, stream>>>(args, rt);
    });
  });
  WM_CUDA_CHECK_LAUNCH(stream);
}

}  // namespace wholestore::embedding::detail
