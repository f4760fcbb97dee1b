// sgns_gradients and sgns_gradients_from_tables: the GPU paths of sgns.hpp.  One warp per pair
// (grid-stride over pairs): lane l holds columns l, l + 32, ... of every row, so each dot
// product is the 32-lane partial sums and shuffle butterfly that detail/sgns_math.hpp specifies
// (and the CPU path emulates), and every gradient element is the same float32 sequence as on
// the CPU (the library compiles its CUDA sources with --fmad=false).
//
// Rows of up to 128 columns with up to 7 negatives are held in registers (4 columns per lane):
// the center row, its gradient and every target row of the pair, each row read once and all
// of a pair's reads in flight together.  Wider rows or more negatives take the general loop,
// which re-reads them from memory.  Where the rows come from is a
// policy: looked-up buffers, or the tables themselves through their views (the lookups fused
// in).  Losses are optionally summed as integers (llround(loss * scale)) with one atomic add
// per pair: exact in any order.
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
/// Columns a lane keeps in registers on the register path (dim <= 32 * reg_cols), and the
/// most target rows per pair it holds (1 + K <= reg_targets).
constexpr int reg_cols = 4;
constexpr int reg_targets = 8;

__device__ __forceinline__ float warp_butterfly(float v) {
  for (int off = detail::sgns_lanes / 2; off >= 1; off /= 2)
    v = v + __shfl_xor_sync(full_mask, v, off);
  return v;
}

/// Rows from looked-up buffers.
struct buffer_rows {
  const float* centers;
  const float* targets;
  std::size_t dim;
  __device__ __forceinline__ const float* center(std::size_t i) const { return centers + i * dim; }
  __device__ __forceinline__ const float* target(std::size_t q) const { return targets + q * dim; }
};

/// Rows straight from the tables; a row outside its table reads as zeros (nullptr) and
/// lowers *first_bad to its position.
struct table_rows {
  table_view input, output;
  const std::int64_t* center_rows;
  const std::int64_t* target_rows;
  std::size_t pairs;
  unsigned long long* first_bad;
  __device__ __forceinline__ const float* pick(const table_view& v, std::int64_t r,
                                               std::size_t position) const {
    if (r < 0 || static_cast<std::uint64_t>(r) >= v.rows) {
      atomicMin(first_bad, static_cast<unsigned long long>(position));
      return nullptr;
    }
    return v.row<float>(static_cast<std::size_t>(r));
  }
  __device__ __forceinline__ const float* center(std::size_t i) const {
    return pick(input, center_rows[i], i);
  }
  __device__ __forceinline__ const float* target(std::size_t q) const {
    return pick(output, target_rows[q], pairs + q);
  }
};

__device__ __forceinline__ float read(const float* row, std::size_t c) {
  return row != nullptr ? row[c] : 0.0f;
}

__device__ __forceinline__ void add_loss(const sgns_batch& b, std::size_t i, float loss,
                                         bool finite, int lane) {
  if (lane != 0) return;
  if (!finite) {
    if (b.losses) b.losses[i] = __int_as_float(0x7fc00000);  // NaN
    if (b.nonfinite_pairs) atomicAdd(b.nonfinite_pairs, 1ull);
    return;
  }
  if (b.losses) b.losses[i] = loss;
  if (b.loss_units) {
    const long long units = llround(static_cast<double>(loss) * b.loss_scale);
    atomicAdd(reinterpret_cast<unsigned long long*>(b.loss_units),
              static_cast<unsigned long long>(units));
  }
}

/// dim <= 32 * reg_cols and 1 + K <= reg_targets: the center row, its gradient and all the
/// pair's target rows in registers.  Every target row is loaded before the first dot product,
/// so a warp has the pair's 1 + K row reads in flight at once (the loads, not the arithmetic,
/// bound this kernel); the arithmetic is the general loop's, in the same order.
template <typename Rows>
__global__ void __launch_bounds__(block_threads) sgns_registers(sgns_batch b, Rows rows) {
  const int lane = static_cast<int>(threadIdx.x) % detail::sgns_lanes;
  const std::size_t warp =
      static_cast<std::size_t>(blockIdx.x) * warps_per_block + threadIdx.x / detail::sgns_lanes;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * warps_per_block;
  const std::size_t dim = b.dim;
  const int per_pair = b.negatives + 1;
  for (std::size_t i = warp; i < b.pairs; i += warps) {
    float u[reg_cols], gu[reg_cols], t[reg_targets][reg_cols];
    const float* urow = rows.center(i);
#pragma unroll
    for (int v = 0; v < reg_cols; ++v) {
      const std::size_t c = static_cast<std::size_t>(lane + detail::sgns_lanes * v);
      u[v] = c < dim ? read(urow, c) : 0.0f;
      gu[v] = 0.0f;
    }
    const std::size_t q0 = i * static_cast<std::size_t>(per_pair);
#pragma unroll
    for (int j = 0; j < reg_targets; ++j) {
      if (j < per_pair) {
        const float* trow = rows.target(q0 + static_cast<std::size_t>(j));
#pragma unroll
        for (int v = 0; v < reg_cols; ++v) {
          const std::size_t c = static_cast<std::size_t>(lane + detail::sgns_lanes * v);
          t[j][v] = c < dim ? read(trow, c) : 0.0f;
        }
      }
    }
    float* g0 = b.target_grads != nullptr ? b.target_grads + q0 * dim : nullptr;
    float loss = 0.0f;
    bool finite = true;
#pragma unroll
    for (int j = 0; j < reg_targets; ++j) {
      if (j >= per_pair) break;
      // lane_dot's order: columns lane, lane + 32, ... added to a partial from 0.
      float partial = 0.0f;
#pragma unroll
      for (int v = 0; v < reg_cols; ++v) {
        const std::size_t c = static_cast<std::size_t>(lane + detail::sgns_lanes * v);
        if (c < dim) partial = partial + u[v] * t[j][v];
      }
      const float s = warp_butterfly(partial);
      finite = finite && detail::finite_score(s);
      float coef;
      if (j == 0) {
        coef = detail::context_coefficient(s);
        loss = detail::softplus(-s);
      } else {
        coef = detail::negative_coefficient(s);
        loss = loss + detail::softplus(s);
      }
      if (b.target_coefs != nullptr && lane == 0)
        b.target_coefs[q0 + static_cast<std::size_t>(j)] = coef;
      float* g = g0 != nullptr ? g0 + static_cast<std::size_t>(j) * dim : nullptr;
#pragma unroll
      for (int v = 0; v < reg_cols; ++v) {
        const std::size_t c = static_cast<std::size_t>(lane + detail::sgns_lanes * v);
        if (c < dim) {
          if (g != nullptr) g[c] = coef * u[v];
          gu[v] = j == 0 ? coef * t[j][v] : gu[v] + coef * t[j][v];
        }
      }
    }
    float* gurow = b.center_grads + i * dim;
#pragma unroll
    for (int v = 0; v < reg_cols; ++v) {
      const std::size_t c = static_cast<std::size_t>(lane + detail::sgns_lanes * v);
      if (c < dim) gurow[c] = gu[v];
    }
    add_loss(b, i, loss, finite, lane);
  }
}

/// Any dim: rows read from memory as often as the arithmetic needs them.
template <typename Rows>
__global__ void sgns_general(sgns_batch b, Rows rows) {
  const int lane = static_cast<int>(threadIdx.x) % detail::sgns_lanes;
  const std::size_t warp =
      static_cast<std::size_t>(blockIdx.x) * warps_per_block + threadIdx.x / detail::sgns_lanes;
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * warps_per_block;
  const std::size_t dim = b.dim;
  const std::size_t per_pair = static_cast<std::size_t>(b.negatives) + 1;
  for (std::size_t i = warp; i < b.pairs; i += warps) {
    const float* u = rows.center(i);
    float* gu = b.center_grads + i * dim;
    float* g0 = b.target_grads != nullptr ? b.target_grads + i * per_pair * dim : nullptr;
    float loss = 0.0f;
    bool finite = true;
    for (std::size_t j = 0; j < per_pair; ++j) {
      const float* t = rows.target(i * per_pair + j);
      float partial = 0.0f;
      for (std::size_t c = static_cast<std::size_t>(lane); c < dim; c += detail::sgns_lanes)
        partial = partial + read(u, c) * read(t, c);
      const float s = warp_butterfly(partial);
      finite = finite && detail::finite_score(s);
      float coef;
      if (j == 0) {
        coef = detail::context_coefficient(s);
        loss = detail::softplus(-s);
      } else {
        coef = detail::negative_coefficient(s);
        loss = loss + detail::softplus(s);
      }
      if (b.target_coefs != nullptr && lane == 0) b.target_coefs[i * per_pair + j] = coef;
      float* g = g0 != nullptr ? g0 + j * dim : nullptr;
      // The center's gradient accumulates target by target, as on the CPU.
      for (std::size_t c = static_cast<std::size_t>(lane); c < dim; c += detail::sgns_lanes) {
        const float uc = read(u, c);
        const float tc = read(t, c);
        if (g != nullptr) g[c] = coef * uc;
        gu[c] = j == 0 ? coef * tc : gu[c] + coef * tc;
      }
    }
    add_loss(b, i, loss, finite, lane);
  }
}

template <typename Rows>
void launch(const sgns_batch& b, const Rows& rows, cudaStream_t stream) {
  const std::size_t blocks =
      std::clamp<std::size_t>((b.pairs + warps_per_block - 1) / warps_per_block, 1, max_blocks);
  if (b.dim <= static_cast<std::size_t>(detail::sgns_lanes * reg_cols) &&
      b.negatives + 1 <= reg_targets) {
    sgns_registers<Rows><<<static_cast<unsigned>(blocks), block_threads, 0, stream>>>(b, rows);
  } else {
    sgns_general<Rows><<<static_cast<unsigned>(blocks), block_threads, 0, stream>>>(b, rows);
  }
  WM_CUDA_CHECK_LAUNCH(stream);
}

}  // namespace

void sgns_gradients(const sgns_batch& b, cudaStream_t stream) {
  detail::check_sgns_batch(b, "sgns_gradients");
  if (b.pairs == 0) return;
  launch(b, buffer_rows{b.centers, b.targets, b.dim}, stream);
}

void sgns_gradients_from_tables(const sgns_table_batch& tb, cudaStream_t stream) {
  detail::check_sgns_table_batch(tb);
  if (tb.out.pairs == 0) return;
  launch(
      tb.out,
      table_rows{tb.input, tb.output, tb.center_rows, tb.target_rows, tb.out.pairs, tb.first_bad},
      stream);
}

}  // namespace wholestore::embedding
