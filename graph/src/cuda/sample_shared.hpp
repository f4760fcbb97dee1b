/*
 * What the GPU sampler's host code (sampling_impl.hpp) and its kernels (sample_*.cuh) share:
 * the launch constants, the fault codes and device_count.  Plain C++, so that the host-only
 * parts of the sampler compile without nvcc.
 */
#pragma once

#include <wholememory/host_device.hpp>

#include <cstdint>

namespace wholestore::graph::gpu {

constexpr int warp_size = 32;
constexpr unsigned full_mask = 0xffffffffu;
/// Weighted hops: nodes with more edges than this are counted and raced by whole blocks.
constexpr std::int64_t big_degree = 2048;
/// Edges per block when a big node is raced by several blocks (fanouts 1 to 32).
constexpr std::int64_t segment_edges = 16384;
constexpr int count_big_threads = 512;  // count_big_kernel
constexpr int fill_big_threads = 256;   // fill_big_kernel
/// fill_kernel's block size, and the blocks an SM must hold at once: the weighted race is
/// bound by issue latency (ncu: 37.5% theoretical occupancy at 70 registers, a third of the
/// stalls on fixed-latency dependencies), so registers are capped for a fourth block.
constexpr int fill_threads = 256;
constexpr int fill_min_blocks = 4;
/// Edges per block when a big node's positive weights are counted by several blocks.
constexpr std::int64_t count_chunk = 8192;

/// A count known on the device (`live`) or, when live is null, on the host (`value`).
struct device_count {
  const long long* live;
  std::int64_t value;
  WM_HOST_DEVICE std::int64_t get() const {
    return live != nullptr ? static_cast<std::int64_t>(*live) : value;
  }
};

/// The random seed of a hop's draws: the call's word, or one per dst node (`per_node`, set on
/// an owner serving other ranks' requests: each node is drawn with the seed of the rank that
/// asked, so the sample is the one that rank would draw from continuous memory).
struct seed_ref {
  const std::uint64_t* word;
  const std::uint64_t* per_node;
  WM_HOST_DEVICE std::uint64_t at(std::int64_t i) const {
    return per_node != nullptr ? per_node[i] : *word;
  }
};

/// A graph changed after its loader checked it: fault[0] = 1 for a row outside the edges (at
/// node fault[1]), 2 for a column index outside the nodes (at edge fault[1]); the first fault
/// wins.  The caller goes on with the row empty or the neighbor replaced by node 0, so nothing
/// is read or written out of bounds, and the call throws before returning.
constexpr long long fault_row = 1;
constexpr long long fault_column = 2;

}  // namespace wholestore::graph::gpu
