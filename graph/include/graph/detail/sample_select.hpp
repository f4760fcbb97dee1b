/*
 * The element logic of neighbor sampling, shared by the CPU path and the CUDA kernels so that
 * both return the same samples bit for bit.  Internal.
 *
 * Randomness is counter-based: the draws for node v at hop h are a SplitMix64 stream keyed by
 * node_key(random_seed, h, v), so a node's sample depends only on (random_seed, hop, node,
 * its neighbor list, fanout) and never on which thread, rank or batch handles it.  draw,
 * rand_below and mix64 are graph/random.hpp's (public; named here too, as detail::draw etc.):
 *
 *   draw(key, c)         = mix64(key + c * 0x9E3779B97F4A7C15)       (c = 0, 1, 2, ...)
 *   rand_below(x, n)     = high 64 bits of x * n                      (in [0, n))
 *
 * Methods, for a node of degree d and fanout k (k < 0: all neighbors, every method):
 *  - uniform (without replacement): d <= k takes positions 0..d-1.  Otherwise Robert Floyd's
 *    algorithm: for c = 0..k-1, j = d - k + c, t = rand_below(draw(key, c), j + 1); the set
 *    gets t, or j when t is already in it.  Positions are returned in ascending order.
 *  - uniform_with_replacement: d == 0 gives nothing, else k positions
 *    rand_below(draw(key, c), d) for c = 0..k-1, in draw order (repeats possible).
 *  - weighted (without replacement, probability proportional to the edge weight; the
 *    exponential-race form of Efraimidis-Spirakis): edges whose weight is not > 0 are never
 *    taken.  Each other edge i gets the race time E_i / w_i, E_i = -log(u_i),
 *    u_i = ((draw(key, i) >> 11) + 0.5) * 2^-53; the k smallest (ties: smaller i) are taken
 *    (all of them when at most k edges have positive weight).  Ascending position order.
 *    log is det_log below, built from correctly rounded +, -, *, / only (the CUDA side uses
 *    the _rn intrinsics, which are never fused), so host and device agree bit for bit.
 *
 * A position p of node v is the edge row_offsets[v] + p (its global edge id).
 */
#pragma once

#include <graph/random.hpp>
#include <wholememory/host_device.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace wholestore::graph {

enum class sample_method { uniform, uniform_with_replacement, weighted };

namespace detail {

// The counter-based generator lives in graph/random.hpp; graph's own code keeps calling it by
// its detail names.
using graph::draw;
using graph::golden_gamma;
using graph::mix64;
using graph::rand_below;

/// The key of node `node`'s draws at hop `hop`.
WM_HOST_DEVICE std::uint64_t node_key(std::uint64_t random_seed, int hop, std::int64_t node) {
  return mix64(mix64(mix64(random_seed) ^ static_cast<std::uint64_t>(hop)) ^
               static_cast<std::uint64_t>(node));
}

// Correctly rounded double operations that no compiler fuses.
WM_HOST_DEVICE double d_add(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;  // the graph target compiles with -ffp-contract=off
#endif
}
WM_HOST_DEVICE double d_sub(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;  // the graph target compiles with -ffp-contract=off
#endif
}
WM_HOST_DEVICE double d_mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;  // the graph target compiles with -ffp-contract=off
#endif
}
WM_HOST_DEVICE double d_div(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;  // the graph target compiles with -ffp-contract=off
#endif
}

/// Natural log of x in (0, 1], about 1e-15 relative error, identical on host and device.
WM_HOST_DEVICE double det_log(double x) {
  std::uint64_t bits;
#if defined(__CUDA_ARCH__)
  bits = static_cast<std::uint64_t>(__double_as_longlong(x));
#else
  std::memcpy(&bits, &x, sizeof bits);
#endif
  // x is normal here: u >= 2^-54 by construction.
  int e = static_cast<int>((bits >> 52) & 0x7FF) - 1023;
  std::uint64_t mbits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;  // m in [1, 2)
  if ((bits & 0x000FFFFFFFFFFFFFull) > 0x6A09E667F3BCDull) {  // m > sqrt(2): use m / 2
    mbits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FE0000000000000ull;
    e += 1;
  }
  double m;
#if defined(__CUDA_ARCH__)
  m = __longlong_as_double(static_cast<long long>(mbits));
#else
  std::memcpy(&m, &mbits, sizeof m);
#endif
  // log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| <= 0.1716.
  double s = d_div(d_sub(m, 1.0), d_add(m, 1.0));
  double s2 = d_mul(s, s);
  double p = 1.0 / 19.0;
  p = d_add(1.0 / 17.0, d_mul(s2, p));
  p = d_add(1.0 / 15.0, d_mul(s2, p));
  p = d_add(1.0 / 13.0, d_mul(s2, p));
  p = d_add(1.0 / 11.0, d_mul(s2, p));
  p = d_add(1.0 / 9.0, d_mul(s2, p));
  p = d_add(1.0 / 7.0, d_mul(s2, p));
  p = d_add(1.0 / 5.0, d_mul(s2, p));
  p = d_add(1.0 / 3.0, d_mul(s2, p));
  double two_s = d_mul(2.0, s);
  double log_m = d_add(two_s, d_mul(two_s, d_mul(s2, p)));
  return d_add(d_mul(static_cast<double>(e), 0.6931471805599453094), log_m);
}

/// The race time of an edge of weight w > 0 whose draw is x.
WM_HOST_DEVICE double race_time_of_draw(std::uint64_t x, float w) {
  double u = d_mul(static_cast<double>(x >> 11) + 0.5, 1.0 / 9007199254740992.0);
  return d_div(-det_log(u), static_cast<double>(w));
}

/// The race time of edge i (weight w) of a node with key `key`; +infinity-like (never taken)
/// is signalled by returning a negative value for weights that are not > 0.
WM_HOST_DEVICE double race_time(std::uint64_t key, std::int64_t i, float w) {
  if (!(w > 0.0f)) return -1.0;
  return race_time_of_draw(draw(key, static_cast<std::uint64_t>(i)), w);
}

/// A cheap pre-test of the race for an edge of weight w > 0 with draw x: false only when its
/// race time is certainly above `bar`, so it cannot be among entries at or before `bar`.
/// Selections skip det_log for such edges; the exact comparisons still use race_time, so the
/// test changes speed, never the sample.  It bounds -log(u) from below with the draw's top 24
/// bits (u < u_hi = (top + 1) / 2^24): first by 1 - u_hi (exact in float, no log; it already
/// rejects nearly every edge that a hub's tight bar rejects), then by a float log with margins
/// far above float error.
WM_HOST_DEVICE bool race_may_beat(std::uint64_t x, float w, double bar) {
  const float u_hi = static_cast<float>((x >> 40) + 1) * 5.9604644775390625e-8f;  // 2^-24
  const float rhs = static_cast<float>(bar) * w * (1.0f + 1e-5f);
  if (1.0f - u_hi > rhs) return false;
#if defined(__CUDA_ARCH__)
  const float e_lo = -__logf(u_hi);
#else
  const float e_lo = -std::log(u_hi);
#endif
  const float lhs = e_lo * (1.0f - 1e-5f) - 1e-4f;
  return !(lhs > rhs);
}

/// True when (ta, a) is taken before (tb, b) in the race.
WM_HOST_DEVICE bool race_before(double ta, std::int64_t a, double tb, std::int64_t b) {
  return ta < tb || (ta == tb && a < b);
}

/// Most positions the sampler can return for a node of degree d.
WM_HOST_DEVICE std::int64_t max_sample_count(sample_method m, std::int64_t d, int fanout) {
  if (fanout < 0) return d;
  if (m == sample_method::uniform_with_replacement) return d > 0 ? fanout : 0;
  return d < fanout ? d : fanout;
}

/// Uniform without replacement (Floyd).  Writes the positions, ascending, to out (room for
/// max_sample_count) and returns their number.  O(k^2) for k < d.
WM_HOST_DEVICE std::int64_t select_uniform(std::uint64_t key, std::int64_t d, int fanout,
                                           std::int64_t* out) {
  if (fanout < 0 || d <= fanout) {
    for (std::int64_t i = 0; i < d; ++i) out[i] = i;
    return d;
  }
  int n = 0;
  for (int c = 0; c < fanout; ++c) {
    std::int64_t j = d - fanout + c;
    std::int64_t t = static_cast<std::int64_t>(
        rand_below(draw(key, static_cast<std::uint64_t>(c)), static_cast<std::uint64_t>(j + 1)));
    bool seen = false;
    for (int i = 0; i < n; ++i) seen |= (out[i] == t);
    out[n++] = seen ? j : t;
  }
  for (int i = 1; i < n; ++i) {  // insertion sort, n is a fanout
    std::int64_t v = out[i];
    int k = i - 1;
    while (k >= 0 && out[k] > v) {
      out[k + 1] = out[k];
      --k;
    }
    out[k + 1] = v;
  }
  return n;
}

/// Uniform with replacement: positions in draw order.
WM_HOST_DEVICE std::int64_t select_with_replacement(std::uint64_t key, std::int64_t d, int fanout,
                                                    std::int64_t* out) {
  if (fanout < 0) {
    for (std::int64_t i = 0; i < d; ++i) out[i] = i;
    return d;
  }
  if (d == 0) return 0;
  for (int c = 0; c < fanout; ++c) {
    out[c] = static_cast<std::int64_t>(
        rand_below(draw(key, static_cast<std::uint64_t>(c)), static_cast<std::uint64_t>(d)));
  }
  return fanout;
}

}  // namespace detail
}  // namespace wholestore::graph
