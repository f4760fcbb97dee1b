// sgns_gradients: the GPU path of sgns.hpp.  One warp per pair (grid-stride over pairs): lane l
// holds columns l, l + 32, ... of every row, so each dot product is the 32-lane partial sums
// and shuffle butterfly that detail/sgns_math.hpp specifies (and the CPU path emulates), and
// every gradient element is the same float32 sequence as on the CPU (the library compiles
// its CUDA sources with --fmad=false).
#include "../sgns_common.hpp"

#include <embedding/detail/sgns_math.hpp>
#include <embedding/sgns.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace wholestore::embedding {
namespace {

constexpr int block_threads = 256;
constexpr int warps_per_block = block_threads / detail::sgns_lanes;
constexpr unsigned full_mask = 0xffffffffu;
constexpr std::size_t max_blocks = std::size_t{1} << 20;

__device__ __forceinline__ float warp_butterfly(float v) {
  for (int off = detail::sgns_lanes / 2; off >= 1; off /= 2)
    v = v + __shfl_xor_sync(full_mask, v, off);
  return v;
}

__global__ void sgns_kernel(sgns_batch b) {
  const int lane = static_cast<int>(threadIdx.x) % detail::sgns_lanes;
  const std::size_t warp =
      static_cast<std::size_t>(blockIdx.x) * warps_per_block + threadIdx.x / detail::sgns_lanes;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * warps_per_block;
  const std::size_t dim = b.dim;
  const std::size_t per_pair = static_cast<std::size_t>(b.negatives) + 1;
  for (std::size_t i = warp; i < b.pairs; i += warps) {
    const float* u = b.centers + i * dim;
    const float* t0 = b.targets + i * per_pair * dim;
    float* gu = b.center_grads + i * dim;
    float* g0 = b.target_grads + i * per_pair * dim;
    float loss = 0.0f;
    for (std::size_t j = 0; j < per_pair; ++j) {
      const float* t = t0 + j * dim;
      const float s = warp_butterfly(detail::lane_dot(u, t, dim, lane));
      float coef;
      if (j == 0) {
        coef = detail::context_coefficient(s);
        loss = detail::softplus(-s);
      } else {
        coef = detail::negative_coefficient(s);
        loss = loss + detail::softplus(s);
      }
      float* g = g0 + j * dim;
      // The center's gradient accumulates target by target, as on the CPU.
      for (std::size_t c = static_cast<std::size_t>(lane); c < dim; c += detail::sgns_lanes) {
        const float uc = u[c];
        const float tc = t[c];
        g[c] = coef * uc;
        gu[c] = j == 0 ? coef * tc : gu[c] + coef * tc;
      }
    }
    if (lane == 0 && b.losses) b.losses[i] = loss;
  }
}

}  // namespace

void sgns_gradients(const sgns_batch& b, cudaStream_t stream) {
  detail::check_sgns_batch(b, "sgns_gradients");
  if (b.pairs == 0) return;
  const std::size_t blocks =
      std::clamp<std::size_t>((b.pairs + warps_per_block - 1) / warps_per_block, 1, max_blocks);
  sgns_kernel<<<static_cast<unsigned>(blocks), block_threads, 0, stream>>>(b);
  WM_CUDA_CHECK_LAUNCH(stream);
}

}  // namespace wholestore::embedding
