/*
 * PtrGen: the one way kernels and host code address WholeMemory.
 *
 *   PtrGen<T, T> gen(ptr);                        // continuous memory: plain pointer arithmetic
 *   PtrGen<const chunked_view, T> gen(&view);    // chunked memory: find the part, then offset
 *   T* p = gen.At(i);                             // element i of the whole allocation
 *
 * At() is __host__ __device__ so one templated function serves CUDA kernels and the CPU path.
 * The chunked lookup binary-searches the part offsets.  Elements never straddle parts when the
 * allocation granularity is a multiple of sizeof(T).
 */
#pragma once

#include <wholememory/host_device.hpp>

#include <cstddef>
#include <cstdint>

namespace wholememory {

/// Most parts a chunked view can describe (ranks of one host, or GPUs of one process).
constexpr int max_view_parts = 64;

/// Trivially copyable description of where every part of an allocation sits in one address
/// space (host or one device).  Byte offsets; parts[i] covers [offsets[i], offsets[i+1]).
struct chunked_view {
  void* parts[max_view_parts];
  std::size_t offsets[max_view_parts + 1];
  /// Size of every part but the last when they are all equal and non-zero, else 0
  /// (informational: the lookup does not need it).
  std::size_t uniform_part_bytes;
  int num_parts;

  /// Part holding byte `offset`: the last part whose start is <= offset (empty parts share
  /// their start with the next one, so they are skipped).  A binary search over at most
  /// max_view_parts offsets: a few compares, cheaper on the GPU than the 64-bit division a
  /// uniform split would allow, which every lane of a packed-row kernel would pay.
  WM_HOST_DEVICE int part_of(std::size_t offset) const {
    int lo = 0, hi = num_parts - 1;
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (offsets[mid] <= offset) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

  /// Address of byte `offset` of the whole allocation.
  WM_HOST_DEVICE void* byte_ptr(std::size_t offset) const {
    int p = part_of(offset);
    return static_cast<char*>(parts[p]) + (offset - offsets[p]);
  }
};

/// Pointer generator.  Primary template: MemT is the element type itself (plain memory).
template <typename MemT, typename T>
class PtrGen {
 public:
  WM_HOST_DEVICE explicit PtrGen(T* ptr) : ptr_(ptr) {}
  WM_HOST_DEVICE explicit PtrGen(void* ptr) : ptr_(static_cast<T*>(ptr)) {}
  /// Element `offset` (in elements of T) of the allocation.
  WM_HOST_DEVICE T* At(std::ptrdiff_t offset) const { return ptr_ + offset; }

 private:
  T* ptr_;
};

/// Chunked memory: locates the part of each element.
template <typename T>
class PtrGen<const chunked_view, T> {
 public:
  WM_HOST_DEVICE explicit PtrGen(const chunked_view* view) : view_(view) {}
  /// The view this generator reads (kernels may copy it into shared memory and rebind).
  WM_HOST_DEVICE const chunked_view* view() const { return view_; }
  WM_HOST_DEVICE T* At(std::ptrdiff_t offset) const {
    return static_cast<T*>(view_->byte_ptr(static_cast<std::size_t>(offset) * sizeof(T)));
  }

 private:
  const chunked_view* view_;
};

}  // namespace wholememory
