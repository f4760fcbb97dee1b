// gpu_window_pairs (walk_pairs.hpp): a flag per slot (both ends of its pair present), an
// exclusive scan of the flags (CUB) for each kept pair's position, the count back to the host,
// then one thread per slot writes its pair and negatives at that position: the CPU path's
// order, compacted the same way.
#include "../walk_pairs_common.hpp"

#include <graph/detail/sample_select.hpp>
#include <graph/walk_pairs.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_scan.cuh>

#include <algorithm>

namespace wholestore::graph {

namespace {

constexpr int block_threads = 256;

unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + block_threads - 1) / block_threads, 1, std::size_t{1} << 20));
}

struct kernel_args {
  window_pairs_args a;
  const std::int32_t* table;
  std::uint64_t slots;
  const std::uint32_t* flags;
  const std::uint32_t* positions;
};

__device__ __forceinline__ const std::int64_t* slot_pair(const window_pairs_args& a,
                                                         const std::int32_t* table,
                                                         std::uint64_t slots, std::uint64_t s,
                                                         std::int64_t* c, std::int64_t* t) {
  const std::size_t row = static_cast<std::size_t>(a.walk_length) + 1;
  const std::int64_t* walk = a.walks + (s / slots - a.first_walk) * row;
  const std::size_t k = static_cast<std::size_t>(s % slots);
  *c = walk[table[2 * k]];
  *t = walk[table[2 * k + 1]];
  return walk;
}

__global__ void flag_slots(window_pairs_args a, const std::int32_t* table, std::uint64_t slots,
                           std::uint32_t* flags) {
  const std::size_t n = static_cast<std::size_t>(a.hi - a.lo);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t x = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; x < n;
       x += stride) {
    std::int64_t c, t;
    slot_pair(a, table, slots, a.lo + x, &c, &t);
    flags[x] = (c >= 0 && t >= 0) ? 1u : 0u;
  }
}

__global__ void write_pairs(kernel_args ka) {
  const window_pairs_args& a = ka.a;
  const std::size_t n = static_cast<std::size_t>(a.hi - a.lo);
  const std::size_t k = static_cast<std::size_t>(a.negatives_per_pair);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t x = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; x < n;
       x += stride) {
    if (!ka.flags[x]) continue;
    std::int64_t c, t;
    slot_pair(a, ka.table, ka.slots, a.lo + x, &c, &t);
    const std::size_t p = ka.positions[x];
    a.centers[p] = c;
    std::int64_t* out = a.targets + p * (k + 1);
    out[0] = t;
    for (std::size_t q = 0; q < k; ++q) out[1 + q] = a.negatives[x * k + q];
  }
}

}  // namespace

std::size_t gpu_window_pairs::build(const window_pairs_args& a, cudaStream_t stream) {
  detail::check_window_pairs(a, "gpu_window_pairs::build");
  const std::size_t n = static_cast<std::size_t>(a.hi - a.lo);
  if (n == 0) return 0;
  // CUB's scan counts items in int.
  WM_EXPECTS(n < (std::size_t{1} << 31),
             "gpu_window_pairs::build: " << n << " slots in one call, at most 2^31 - 1");
  const int device = wholememory::current_device();
  if (slot_table_.empty() || table_length_ != a.walk_length || table_window_ != a.window) {
    const std::vector<std::int32_t> t = detail::slot_table(a.walk_length, a.window);
    slot_table_.reserve_discard(t.size() * sizeof(std::int32_t), device);
    WM_CUDA_TRY(cudaMemcpy(slot_table_.data(), t.data(), t.size() * sizeof(std::int32_t),
                           cudaMemcpyHostToDevice));
    table_length_ = a.walk_length;
    table_window_ = a.window;
  }
  const std::uint64_t slots = window_slots(a.walk_length, a.window);
  const auto* table = slot_table_.data_as<const std::int32_t>();
  auto* flags = static_cast<std::uint32_t*>(flags_.reserve_discard(n * 4, device));
  auto* positions = static_cast<std::uint32_t*>(positions_.reserve_discard(n * 4, device));
  flag_slots<<<grid_for(n), block_threads, 0, stream>>>(a, table, slots, flags);
  WM_CUDA_CHECK_LAUNCH(stream);
  std::size_t temp_bytes = 0;
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, flags, positions,
                                            static_cast<int>(n), stream));
  void* temp = temp_.reserve_discard(std::max<std::size_t>(temp_bytes, 1), device);
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, flags, positions, static_cast<int>(n),
                                            stream));
  write_pairs<<<grid_for(n), block_threads, 0, stream>>>(
      kernel_args{a, table, slots, flags, positions});
  WM_CUDA_CHECK_LAUNCH(stream);
  std::uint32_t last[2] = {0, 0};
  WM_CUDA_TRY(cudaMemcpyAsync(&last[0], positions + (n - 1), 4, cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaMemcpyAsync(&last[1], flags + (n - 1), 4, cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  return static_cast<std::size_t>(last[0]) + last[1];
}

namespace {

/// One thread per slot: the edge, its row by binary search (the last row whose first edge is
/// at or before e: rows without edges share their start with the next row), its target, the
/// slot's negatives.
template <typename Row, typename Col>
__global__ void edge_pairs_kernel(Row row, Col col, std::uint64_t num_nodes,
                                  std::uint64_t num_edges, edge_pairs_args a) {
  const std::size_t n = static_cast<std::size_t>(a.hi - a.lo);
  const std::size_t k = static_cast<std::size_t>(a.negatives_per_pair);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t x = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; x < n;
       x += stride) {
    const std::uint64_t s = a.lo + x;
    const auto e = static_cast<std::int64_t>(detail::rand_below(detail::draw(a.key, s), num_edges));
    std::uint64_t lo = 0, hi = num_nodes - 1;
    while (lo < hi) {
      const std::uint64_t mid = (lo + hi + 1) / 2;
      if (*row.At(static_cast<std::ptrdiff_t>(mid)) <= e) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    a.centers[x] = static_cast<std::int64_t>(lo);
    std::int64_t* out = a.targets + x * (k + 1);
    out[0] = static_cast<std::int64_t>(*col.At(e));
    for (std::size_t q = 0; q < k; ++q) out[1 + q] = a.negatives[x * k + q];
  }
}

template <typename Row, typename Col>
void launch_edge_pairs(Row row, Col col, const csr_graph& g, const edge_pairs_args& a,
                       cudaStream_t stream) {
  edge_pairs_kernel<<<grid_for(static_cast<std::size_t>(a.hi - a.lo)), block_threads, 0, stream>>>(
      row, col, g.num_nodes, g.num_edges, a);
  WM_CUDA_CHECK_LAUNCH(stream);
}

template <typename ColT>
void edge_pairs_typed(const csr_graph& g, const edge_pairs_args& a, cudaStream_t stream) {
  namespace wm = wholememory;
  if (g.type() == wm::memory_type::continuous) {
    launch_edge_pairs(
        wm::PtrGen<const std::int64_t, const std::int64_t>(
            static_cast<const std::int64_t*>(g.row_offsets.data())),
        wm::PtrGen<const ColT, const ColT>(static_cast<const ColT*>(g.col_indices.data())), g, a,
        stream);
  } else {
    const int device = wm::current_device();
    launch_edge_pairs(
        wm::PtrGen<const wm::chunked_view, const std::int64_t>(g.row_offsets.device_view(device)),
        wm::PtrGen<const wm::chunked_view, const ColT>(g.col_indices.device_view(device)), g, a,
        stream);
  }
}

}  // namespace

void edge_pairs(const csr_graph& g, const edge_pairs_args& a, cudaStream_t stream) {
  WM_EXPECTS(g.type() != wholememory::memory_type::distributed,
             "edge_pairs: the graph is in distributed memory; the GPU path reads it through "
             "continuous or chunked memory");
  WM_EXPECTS(g.num_edges > 0 && g.num_nodes > 0, "edge_pairs: the graph has no edges");
  WM_EXPECTS(a.negatives_per_pair >= 0,
             "edge_pairs: negatives_per_pair must be >= 0, got " << a.negatives_per_pair);
  WM_EXPECTS(a.lo <= a.hi, "edge_pairs: lo " << a.lo << " > hi " << a.hi);
  if (a.lo == a.hi) return;
  WM_EXPECTS(a.centers && a.targets && (a.negatives || a.negatives_per_pair == 0),
             "edge_pairs: centers, targets and negatives must be set");
  if (g.col_type == wholememory::dtype::int32) {
    edge_pairs_typed<std::int32_t>(g, a, stream);
  } else {
    edge_pairs_typed<std::int64_t>(g, a, stream);
  }
}

}  // namespace wholestore::graph
