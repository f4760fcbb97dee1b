/*
 * The arithmetic of skip-gram with negative sampling (embedding/sgns.hpp), shared by the CPU
 * path and the CUDA kernel so that both compute the same float32 operations in the same order.
 * Only +, -, *, / and exact conversions are used: expf, logf and tanhf differ in the last ulp
 * between glibc and CUDA, and every value here feeds the weights (or the reported loss, which
 * must be the same figure on every path too).  The library compiles the host side with
 * -ffp-contract=off and the device side with --fmad=false, so no product is fused into an add.
 *
 *   score s      = dot(center, target): lane l of 32 sums center[c] * target[c] over
 *                  c = l, l + 32, ... in increasing c, starting from 0.0f; then the butterfly
 *                  partial[l] = partial[l] + partial[l ^ off], off = 16, 8, 4, 2, 1, and s is
 *                  partial[0] (a warp computes exactly this with shuffles; the CPU emulates the
 *                  32 lanes on an array, which also vectorizes)
 *   clamped      = s limited to [-score_limit, score_limit]
 *   det_exp(x)   = 2^n * p(r), n = x / ln 2 rounded half away from zero, r = x - n * ln2_hi -
 *                  n * ln2_lo, p the degree-7 Taylor polynomial of e^r in Horner form
 *   coefficient  = context: sigmoid(s) - 1 = -1 / (1 + det_exp(s)); negative: sigmoid(s) =
 *                  1 / (1 + det_exp(-s))
 *   loss         = softplus(-s) for the context, softplus(s) for each negative, summed in
 *                  that order; softplus(y) = max(y, 0) + log1p(det_exp(-|y|)) with log1p(t) =
 *                  2 atanh(t / (2 + t)) as its odd series to z^17
 */
#pragma once

#include <wholememory/convert.hpp>
#include <wholememory/host_device.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::embedding::detail {

/// Lanes of the dot product's fixed summation order (a warp).
constexpr int sgns_lanes = 32;

/// Scores are clamped to [-score_limit, score_limit] before the sigmoid: beyond it the
/// sigmoid is 1 or 0 to within 2e-9, and det_exp stays far from overflow.
constexpr float score_limit = 20.0f;

/// e^x for x in [-score_limit, score_limit] (relative error below 1e-7 there); the argument is
/// clamped to that range first.
WM_HOST_DEVICE float det_exp(float x) {
  x = x < -score_limit ? -score_limit : (x > score_limit ? score_limit : x);
  const float inv_ln2 = 1.44269504088896341f;
  const float ln2_hi = 0.693145751953125f;  // 12 significant bits: n * ln2_hi is exact
  const float ln2_lo = 1.42860682030941723e-06f;
  const float t = x * inv_ln2;
  const int n = static_cast<int>(t < 0.0f ? t - 0.5f : t + 0.5f);  // |n| <= 29
  const float nf = static_cast<float>(n);
  const float r = (x - nf * ln2_hi) - nf * ln2_lo;
  // Horner form of 1 + r + r^2/2! + ... + r^7/7!.
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n from its exponent bits (n + 127 in [98, 156]: a normal float).
  const float scale = wholememory::bit_cast_value<float>(static_cast<std::uint32_t>(n + 127) << 23);
  return p * scale;
}

/// log(1 + t) for t in [0, 1].
WM_HOST_DEVICE float det_log1p(float t) {
  const float z = t / (2.0f + t);  // in [0, 1/3]
  const float z2 = z * z;
  float s = 1.0f / 17.0f;
  s = s * z2 + 1.0f / 15.0f;
  s = s * z2 + 1.0f / 13.0f;
  s = s * z2 + 1.0f / 11.0f;
  s = s * z2 + 1.0f / 9.0f;
  s = s * z2 + 1.0f / 7.0f;
  s = s * z2 + 1.0f / 5.0f;
  s = s * z2 + 1.0f / 3.0f;
  s = s * z2 + 1.0f;
  return 2.0f * z * s;
}

/// log(1 + e^y), the logistic loss; y is clamped to [-score_limit, score_limit].
WM_HOST_DEVICE float softplus(float y) {
  y = y < -score_limit ? -score_limit : (y > score_limit ? score_limit : y);
  const float a = y < 0.0f ? -y : y;
  return (y > 0.0f ? y : 0.0f) + det_log1p(det_exp(-a));
}

/// Whether a score is finite: NaN and +-Inf come only from rows holding NaN or Inf (a diverged
/// table), and the clamps below would hide an infinite score.  s - s is 0 for a finite s and
/// NaN otherwise (no -ffinite-math-only in this library's flags).
WM_HOST_DEVICE bool finite_score(float s) { return s - s == 0.0f; }

/// d loss / d score of a context (positive) pair: sigmoid(s) - 1.
WM_HOST_DEVICE float context_coefficient(float s) { return -1.0f / (1.0f + det_exp(s)); }

/// d loss / d score of a negative pair: sigmoid(s).
WM_HOST_DEVICE float negative_coefficient(float s) { return 1.0f / (1.0f + det_exp(-s)); }

/// Lane `lane`'s partial sum of a[c] * b[c] over c = lane, lane + 32, ... < dim.
WM_HOST_DEVICE float lane_dot(const float* a, const float* b, std::size_t dim, int lane) {
  float sum = 0.0f;
  for (std::size_t c = static_cast<std::size_t>(lane); c < dim; c += sgns_lanes)
    sum = sum + a[c] * b[c];
  return sum;
}

/// The butterfly over 32 lane partials (destroys `partial`); returns the total every lane of
/// a warp holds after the shuffles.  Lane 0's value only needs lanes [0, off) at each level:
/// partial[l] + partial[l ^ off] is partial[l] + partial[l + off] for l < off, in that operand
/// order, as lane l adds it.
inline float butterfly_sum(float* partial) {
  for (int off = sgns_lanes / 2; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) partial[l] = partial[l] + partial[l + off];
  return partial[0];
}

/// The score of two rows on the CPU, in the order above.
inline float dot_host(const float* a, const float* b, std::size_t dim) {
  float partial[sgns_lanes] = {};
  // Column-major over the lanes: the same per-lane order as lane_dot, and the compiler keeps
  // the 32 accumulators in vector registers.
  std::size_t c = 0;
  for (; c + sgns_lanes <= dim; c += sgns_lanes)
    for (int l = 0; l < sgns_lanes; ++l) partial[l] = partial[l] + a[c + l] * b[c + l];
  for (int l = 0; c + static_cast<std::size_t>(l) < dim; ++l)
    partial[l] = partial[l] + a[c + l] * b[c + l];
  return butterfly_sum(partial);
}

}  // namespace wholestore::embedding::detail
