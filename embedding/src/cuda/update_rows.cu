// The fused optimizer kernel: the owner's received list is sorted by row; the warp of the first
// entry of each run of equal rows sums the run's gradient rows element by element (lane l
// takes columns l, l + 32, ...), left to right in global batch order, and applies weight decay
// and the optimizer through the element function the CPU path uses
// (embedding/detail/optimizer_update.hpp).  Only the owner writes its rows: no atomics.
#include "../dispatch.hpp"
#include "update_rows.hpp"

#include <wholememory/convert.hpp>
#include <wholememory/cuda_check.hpp>

#include <cuda_runtime.h>

#include <algorithm>

namespace wholestore::embedding::detail {
namespace {

constexpr int block_threads = 256;
constexpr int warps_per_block = block_threads / 32;
constexpr unsigned full_mask = 0xffffffffu;

/// Column c of the summed gradient of sorted entries [first, last).
__device__ __forceinline__ float summed_gradient(const update_rows_args& a, std::size_t first,
                                                 std::size_t last, std::size_t c) {
  float acc = a.grads[static_cast<std::size_t>(a.order[first]) * a.dim + c];
  for (std::size_t j = first + 1; j < last; ++j)
    acc = acc + a.grads[static_cast<std::size_t>(a.order[j]) * a.dim + c];
  return acc;
}

template <typename TableT, optimizer_kind Kind>
__global__ void __launch_bounds__(block_threads) update_rows_kernel(const update_rows_args a) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * warps_per_block;
  std::size_t k = static_cast<std::size_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  for (; k < a.m; k += warps) {
    const std::uint64_t key = a.sorted_keys[k];
    if (k > 0 && a.sorted_keys[k - 1] == key) continue;  // not the first of its run
    std::size_t last = k + 1;
    while (last < a.m && a.sorted_keys[last] == key) ++last;
    const std::size_t local = static_cast<std::size_t>(key - a.row_begin);
    TableT* w = static_cast<TableT*>(a.weights) + local * a.dim;
    float row_state = 0.0f;
    if constexpr (Kind == optimizer_kind::rowwise_adagrad) {
      float partial = 0.0f;
      for (std::size_t c = lane; c < a.dim; c += 32) {
        const float g = apply_weight_decay(a.params, summed_gradient(a, k, last, c),
                                           wholememory::convert_element<float>(w[c]));
        partial = partial + g * g;
      }
      for (int off = 16; off >= 1; off /= 2)
        partial = partial + __shfl_xor_sync(full_mask, partial, off);
      const float total = __shfl_sync(full_mask, partial, 0);
      row_state = rowwise_state(a.state0[local], total, a.dim);
      __syncwarp();
      if (lane == 0) a.state0[local] = row_state;
    }
    for (std::size_t c = lane; c < a.dim; c += 32) {
      const float wf = wholememory::convert_element<float>(w[c]);
      const float g = apply_weight_decay(a.params, summed_gradient(a, k, last, c), wf);
      float* e0 = nullptr;
      float* e1 = nullptr;
      if constexpr (Kind != optimizer_kind::sgd && Kind != optimizer_kind::rowwise_adagrad) {
        e0 = a.state0 + local * a.dim + c;
      }
      if constexpr (Kind == optimizer_kind::adam) e1 = a.state1 + local * a.dim + c;
      w[c] = wholememory::convert_element<TableT>(
          update_element<Kind>(a.params, wf, g, e0, e1, row_state));
    }
  }
}

}  // namespace

void launch_update_rows(wholememory::dtype table_type, optimizer_kind kind,
                        const update_rows_args& args, cudaStream_t stream) {
  if (args.m == 0) return;
  const std::size_t blocks_needed = (args.m + warps_per_block - 1) / warps_per_block;
  const unsigned blocks = static_cast<unsigned>(std::min<std::size_t>(blocks_needed, 1u << 20));
  dispatch_float_type(table_type, "the table dtype", [&](auto tag) {
    using T = decltype(tag);
    dispatch_optimizer(kind, [&](auto k) {
      update_rows_kernel<T, decltype(k)::value><<<blocks, block_threads, 0, stream>>>(args);
    });
  });
  WM_CUDA_CHECK_LAUNCH();
}

}  // namespace wholestore::embedding::detail
