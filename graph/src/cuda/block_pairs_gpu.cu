// gpu_block_pairs (block_pairs.hpp): each pair's block as a key (and the id check), a stable
// radix sort of (block, position) on the block's bits (CUB), then one thread per output pair
// writes its rows; the per-block counts from a shared-memory histogram.
#include <graph/block_pairs.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <vector>

namespace wholestore::graph {

namespace {

constexpr int block_threads = 256;
constexpr int shared_bins = 4096;  // histograms in shared memory up to 64 partitions

unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + block_threads - 1) / block_threads, 1, std::size_t{1} << 16));
}

// key[p] = block of pair p, order[p] = p; a pair with an id outside [0, nodes) lowers *bad to
// its first position (centers first, then targets + pairs) and counts nowhere.
__global__ void block_keys(block_pairs_args a, std::uint32_t* keys, std::uint32_t* order,
                           unsigned long long* counts, unsigned long long* bad) {
  __shared__ unsigned int hist[shared_bins];
  const int parts = a.layout.partitions;
  const int bins = parts * parts;
  const bool shared = bins <= shared_bins;
  if (shared)
    for (int b = threadIdx.x; b < bins; b += blockDim.x) hist[b] = 0;
  __syncthreads();
  const auto nodes = static_cast<std::int64_t>(a.layout.nodes);
  const auto per = static_cast<std::size_t>(a.negatives_per_pair) + 1;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t p = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < a.pairs;
       p += stride) {
    const std::int64_t u = a.centers[p];
    bool ok = u >= 0 && u < nodes;
    if (!ok) atomicMin(bad, static_cast<unsigned long long>(p));
    for (std::size_t j = 0; j < per; ++j) {
      const std::int64_t t = a.targets[p * per + j];
      if (t < 0 || t >= nodes) {
        atomicMin(bad, static_cast<unsigned long long>(a.pairs + p * per + j));
        ok = false;
      }
    }
    const auto k =
        ok ? static_cast<std::uint32_t>((u % parts) * parts + a.targets[p * per] % parts) : 0u;
    keys[p] = k;
    order[p] = static_cast<std::uint32_t>(p);
    if (!ok) continue;
    if (shared) {
      atomicAdd(&hist[k], 1u);
    } else {
      atomicAdd(&counts[k], 1ull);
    }
  }
  __syncthreads();
  if (shared)
    for (int b = threadIdx.x; b < bins; b += blockDim.x)
      if (hist[b]) atomicAdd(&counts[b], static_cast<unsigned long long>(hist[b]));
}

__global__ void write_block_rows(block_pairs_args a, const std::uint32_t* sorted_order) {
  const auto per = static_cast<std::size_t>(a.negatives_per_pair) + 1;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t q = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < a.pairs;
       q += stride) {
    const std::size_t p = sorted_order[q];
    // A bad pair (reported after the call): nothing to draw from.
    if (a.centers[p] < 0 || a.targets[p * per] < 0) continue;
    detail::write_block_pair(a, p, q);
  }
}

}  // namespace

void gpu_block_pairs::build(const block_pairs_args& a, cudaStream_t stream) {
  detail::check_block_pairs(a, "gpu_block_pairs::build");
  const int parts = a.layout.partitions;
  const std::size_t bins = static_cast<std::size_t>(parts) * static_cast<std::size_t>(parts);
  if (a.pairs == 0) {
    std::fill(a.counts, a.counts + bins, 0);
    return;
  }
  // CUB's radix sort counts items in int; positions are 32-bit.
  WM_EXPECTS(a.pairs < (std::size_t{1} << 31),
             "gpu_block_pairs::build: " << a.pairs << " pairs in one call, at most 2^31 - 1");
  const int device = wholememory::current_device();
  const std::size_t n = a.pairs;
  auto* keys = static_cast<std::uint32_t*>(keys_.reserve_discard(n * 4, device));
  auto* sorted_keys = static_cast<std::uint32_t*>(sorted_keys_.reserve_discard(n * 4, device));
  auto* order = static_cast<std::uint32_t*>(order_.reserve_discard(n * 4, device));
  auto* sorted_order = static_cast<std::uint32_t*>(sorted_order_.reserve_discard(n * 4, device));
  // counts, then the bad-position word
  auto* counts = static_cast<unsigned long long*>(counts_.reserve_discard((bins + 1) * 8, device));
  WM_CUDA_TRY(cudaMemsetAsync(counts, 0, bins * 8, stream));
  WM_CUDA_TRY(cudaMemsetAsync(counts + bins, 0xff, 8, stream));
  block_keys<<<grid_for(n), block_threads, 0, stream>>>(a, keys, order, counts, counts + bins);
  WM_CUDA_CHECK_LAUNCH(stream);
  int bits = 1;
  while ((std::size_t{1} << bits) < bins) ++bits;
  std::size_t temp_bytes = 0;
  WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, keys, sorted_keys, order,
                                              sorted_order, static_cast<int>(n), 0, bits, stream));
  void* temp = temp_.reserve_discard(std::max<std::size_t>(temp_bytes, 1), device);
  WM_CUDA_TRY(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, keys, sorted_keys, order,
                                              sorted_order, static_cast<int>(n), 0, bits, stream));
  write_block_rows<<<grid_for(n), block_threads, 0, stream>>>(a, sorted_order);
  WM_CUDA_CHECK_LAUNCH(stream);
  std::vector<unsigned long long> host(bins + 1);
  WM_CUDA_TRY(cudaMemcpyAsync(host.data(), counts, (bins + 1) * 8, cudaMemcpyDeviceToHost, stream));
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  WM_EXPECTS(host[bins] == ~0ull, "gpu_block_pairs::build: the id at position "
                                      << (host[bins] < n ? host[bins] : host[bins] - n)
                                      << " of the " << (host[bins] < n ? "centers" : "targets")
                                      << " is outside [0, " << a.layout.nodes << ")");
  for (std::size_t b = 0; b < bins; ++b) a.counts[b] = host[b];
}

}  // namespace wholestore::graph
