/*
 * The optimizer arithmetic shared by the CPU path and the CUDA kernel, so that both compute
 * the same float32 operations in the same order (the build turns floating-point contraction
 * off on both sides, and sqrt and division are IEEE on both).
 *
 * Per touched row, with its duplicate gradient rows (its run) in global batch order:
 *   g[c] = the run's tree sum of g[c] (below)
 *   g[c] = apply_weight_decay(p, g[c], w[c])
 *   rowwise_adagrad only: s_row = rowwise_state(s_row, butterfly sum of g[c] * g[c], dim)
 *   w[c] = update_element<kind>(p, w[c], g[c], state...)
 * The row-wise sum is the one a warp computes: lane l sums g*g over c = l, l + 32, ... from
 * 0.0f, then partial[l] = partial[l] + partial[l ^ off] for off = 16, 8, 4, 2, 1, and the total
 * is partial[0]; the CPU path emulates the 32 lanes on an array.
 *
 * The tree sum of a run: while it has more than sum_fan_in items, each group of sum_fan_in
 * consecutive items (the last group may be shorter) is replaced by its sum; then the at most
 * sum_fan_in items left are summed.  Every sum runs left to right and starts from its first
 * item (not from 0.0f, which would turn -0.0f into +0.0f).  Runs of at most sum_fan_in
 * duplicates are therefore summed plainly left to right; a hot row's thousands of duplicates
 * are summed by many GPU warps at once, and the order is still a function of the run alone.
 */
#pragma once

#include <embedding/table.hpp>
#include <wholememory/ptr_gen.hpp>

#include <math.h>

#include <cstddef>

namespace wholestore::embedding::detail {

/// Float32 parameters of one apply_gradients call, computed once on the host
/// (make_update_params) and passed unchanged to either path.
struct update_params {
  float lr;
  float weight_decay;
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float alpha, one_minus_alpha;
  float adam_step_size;     ///< lr / (1 - beta1^t)
  float adam_inv_sqrt_bc2;  ///< 1 / sqrt(1 - beta2^t)
};

/// Parameters for a call at step t (>= 1, after the increment); Adam's bias corrections in
/// double, rounded to float once.
update_params make_update_params(const optimizer_options& o, float lr, std::uint64_t t);

/// Lanes of the row-wise reduction (a warp).
constexpr int reduction_lanes = 32;

/// Items summed by one node of the duplicate-gradient tree (see the top of this file).
constexpr int sum_fan_in = 32;

WM_HOST_DEVICE float apply_weight_decay(const update_params& p, float g, float w) {
  return p.weight_decay != 0.0f ? g + p.weight_decay * w : g;
}

/// Row-wise AdaGrad's new row state from the butterfly total of g * g over the row.
WM_HOST_DEVICE float rowwise_state(float s, float total, std::size_t dim) {
  return s + total / static_cast<float>(dim);
}

/// The update of one element: returns the new weight (float32, before rounding to the table
/// dtype) and updates the element's state: s0 = m, s1 = v (adam); s0 = s (adagrad, rmsprop).
/// row_state is rowwise_adagrad's updated row state (unused by the others).
template <optimizer_kind Kind>
WM_HOST_DEVICE float update_element(const update_params& p, float w, float g, float* s0, float* s1,
                                    float row_state) {
  if constexpr (Kind == optimizer_kind::sgd) {
    return w - p.lr * g;
  } else if constexpr (Kind == optimizer_kind::adam) {
    const float m = p.beta1 * *s0 + p.one_minus_beta1 * g;
    const float v = p.beta2 * *s1 + p.one_minus_beta2 * (g * g);
    *s0 = m;
    *s1 = v;
    const float denom = sqrtf(v) * p.adam_inv_sqrt_bc2 + p.eps;
    return w - (p.adam_step_size * m) / denom;
  } else if constexpr (Kind == optimizer_kind::adagrad) {
    const float s = *s0 + g * g;
    *s0 = s;
    return w - (p.lr * g) / (sqrtf(s) + p.eps);
  } else if constexpr (Kind == optimizer_kind::rowwise_adagrad) {
    return w - (p.lr * g) / (sqrtf(row_state) + p.eps);
  } else {
    static_assert(Kind == optimizer_kind::rmsprop, "unknown optimizer");
    const float s = p.alpha * *s0 + p.one_minus_alpha * (g * g);
    *s0 = s;
    return w - (p.lr * g) / (sqrtf(s) + p.eps);
  }
}

/// Number of float32 state arrays of an optimizer and their columns per row.
inline int state_count(optimizer_kind k) {
  switch (k) {
    case optimizer_kind::sgd:
      return 0;
    case optimizer_kind::adam:
      return 2;
    default:
      return 1;
  }
}
inline std::size_t state_cols(optimizer_kind k, std::size_t dim) {
  return k == optimizer_kind::rowwise_adagrad ? 1 : dim;
}

}  // namespace wholestore::embedding::detail
