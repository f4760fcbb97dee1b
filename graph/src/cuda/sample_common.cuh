/*
 * What every kernel of the GPU sampler shares (an internal header of src/cuda/): thread
 * indexing, the readers of row offsets and weights, and the recording of a graph fault (the
 * launch constants and device_count, which the host code uses too, are in sample_shared.hpp).
 * The sampler's layout is described in sampling_impl.hpp; the kernels are split by role:
 *   sample_count_kernels.cuh    start, degree and count of every dst node (step 1 of a hop)
 *   sample_select_warp.cuh      warp-level selection: the weighted race, Floyd, with replacement
 *   sample_fill_kernels.cuh     the sampled positions as edge ids (step 3)
 *   sample_relabel_kernels.cuh  the key table and the local ids (step 4, and the seeds)
 */
#pragma once

#include "sample_shared.hpp"

#include <graph/detail/sample_select.hpp>

#include <cuda_runtime.h>

#include <cstdint>

namespace wholestore::graph::gpu {

namespace d = ::wholestore::graph::detail;

__device__ __forceinline__ std::int64_t thread_id() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t thread_count() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

__device__ __forceinline__ void record_fault(long long* fault, long long kind, long long where) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(fault), 0ull,
                static_cast<unsigned long long>(kind)) == 0ull) {
    fault[1] = where;
  }
}

/// Whether [s, e) is a row within a graph of num_edges edges.
__device__ __forceinline__ bool row_in_bounds(std::int64_t s, std::int64_t e,
                                              std::int64_t num_edges) {
  return s >= 0 && e >= s && e <= num_edges;
}

/// Row offsets of dst node i (id v), read through a PtrGen.
template <typename Gen>
struct ro_direct {
  Gen gen;
  __device__ __forceinline__ void operator()(std::int64_t /*i*/, std::int64_t v, std::int64_t& s,
                                             std::int64_t& e) const {
    s = *gen.At(v);
    e = *gen.At(v + 1);
  }
};

/// Row offsets gathered for the frontier (distributed memory): ro2[2i], ro2[2i + 1].
struct ro_gathered {
  const std::int64_t* ro2;
  __device__ __forceinline__ void operator()(std::int64_t i, std::int64_t /*v*/, std::int64_t& s,
                                             std::int64_t& e) const {
    s = ro2[2 * i];
    e = ro2[2 * i + 1];
  }
};

/// Row offsets of the nodes this rank owns, read by their owner (distributed graphs whose
/// edges follow their nodes, sampling_owner.cu): entries [first, end) of row_offsets are at
/// part[0 ...]; entry `end` (the next part's first) is edge_end, where this rank's edges end.
/// A row outside this rank's edges [edge_begin, edge_end], or a node outside its entries,
/// comes back as [-1, -1), which the caller records as a corrupt row: nothing outside the own
/// parts is read.
struct ro_owned {
  const std::int64_t* part;
  std::int64_t first, end, edge_begin, edge_end;
  __device__ __forceinline__ void operator()(std::int64_t /*i*/, std::int64_t v, std::int64_t& s,
                                             std::int64_t& e) const {
    const std::int64_t k = v - first;
    if (k < 0 || v >= end) {
      s = e = -1;
      return;
    }
    s = part[k];
    e = v + 1 < end ? part[k + 1] : edge_end;
    if (s < edge_begin || e < s || e > edge_end) s = e = -1;
  }
};

/// The own part of an array, indexed by global element (At(i) for i within the part): the
/// columns and weights of an owner's rows (sampling_owner.cu).
template <typename T>
struct owned_part {
  const T* data;  // element `first` of the whole array
  std::int64_t first;
  __device__ __forceinline__ const T* At(std::int64_t i) const { return data + (i - first); }
};

/// Reads the weight of position p of dst node i (whose edges start at `start`).
template <typename Gen>
struct direct_weights {
  Gen gen;
  __device__ __forceinline__ float operator()(std::int64_t /*i*/, std::int64_t start,
                                              std::int64_t p) const {
    return *gen.At(start + p);
  }
};

/// Weights gathered for the frontier (distributed memory): node i's at buf[base[i] + p].
struct gathered_weights {
  const float* buf;
  const std::int64_t* base;
  __device__ __forceinline__ float operator()(std::int64_t i, std::int64_t /*start*/,
                                              std::int64_t p) const {
    return buf[base[i] + p];
  }
};

}  // namespace wholestore::graph::gpu
