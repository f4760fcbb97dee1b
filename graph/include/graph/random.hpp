/*
 * The counter-based random numbers every deterministic part of wholestore draws from: the
 * sampler, the walks, the negative sampler, the edge split, and the trainer's pair order
 * (train/).  There is no generator state: draw c of a stream is a pure function of the
 * stream's key and c, so a result never depends on which thread, rank, batch or device
 * computes it, and a run resumed at any counter continues exactly.
 *
 *   mix64(z)         = SplitMix64's output function applied to the state z + golden_gamma
 *   draw(key, c)     = mix64(key + c * golden_gamma)                   (c = 0, 1, 2, ...)
 *   rand_below(x, n) = high 64 bits of the 128-bit product x * n       (in [0, n) for n > 0)
 *
 * A key is made by mixing what the stream is for: mix64(mix64(seed) ^ purpose) and the like
 * (the users' headers give their own keys, e.g. graph/detail/sample_select.hpp's node_key).
 * All functions are WM_HOST_DEVICE: CUDA kernels and host code call the same definitions and
 * get the same bits (rand_below uses __umul64hi on the device, 128-bit integers on the host).
 * Nothing here throws, allocates or synchronizes; rand_below(x, 0) is 0.
 */
#pragma once

#include <wholememory/host_device.hpp>

#include <cstdint>

namespace wholestore::graph {

/// 2^64 / golden ratio, SplitMix64's increment: consecutive counters of a stream are this far
/// apart before mixing.
constexpr std::uint64_t golden_gamma = 0x9E3779B97F4A7C15ull;

/// SplitMix64's finalizer on z + golden_gamma: a bijection of 64-bit words.
WM_HOST_DEVICE std::uint64_t mix64(std::uint64_t z) {
  z += golden_gamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Draw `c` of the stream keyed by `key`.
WM_HOST_DEVICE std::uint64_t draw(std::uint64_t key, std::uint64_t c) {
  return mix64(key + c * golden_gamma);
}

/// A uniform draw `x` scaled to [0, n) without division (Lemire's multiply-shift).
WM_HOST_DEVICE std::uint64_t rand_below(std::uint64_t x, std::uint64_t n) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(x, n);
#else
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
#endif
}

}  // namespace wholestore::graph
