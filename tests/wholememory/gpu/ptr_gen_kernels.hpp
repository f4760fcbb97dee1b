/*
 * Test kernels that write and check a pattern through PtrGen, so the GPU tests address
 * WholeMemory the way library kernels do.  Plain C++ declarations; the kernels and their
 * launchers are in ptr_gen_kernels.cu.
 *
 * Element i of an allocation (int64 elements) holds pattern_value(i, salt).  Every launcher is
 * enqueued on `stream` on the calling thread's current device and does not synchronize.
 */
#pragma once

#include <wholememory/ptr_gen.hpp>
#include <wholememory/stream.hpp>

#include <cstdint>

namespace wholestore_test {

/// The value element `index` holds: index * 2654435761 ^ salt (64-bit wrap-around).
WM_HOST_DEVICE std::int64_t pattern_value(std::int64_t index, std::uint64_t salt) {
  return static_cast<std::int64_t>((static_cast<std::uint64_t>(index) * 2654435761ull) ^ salt);
}

/// Continuous memory (or one plain part): for i in [begin, end), writes
/// pattern_value(i + value_shift, salt) to element i of `base`
/// (PtrGen<int64_t, int64_t>).
void write_pattern(void* base, std::int64_t begin, std::int64_t end, std::int64_t value_shift,
                   std::uint64_t salt, cudaStream_t stream);

/// Chunked memory: the same through PtrGen<const chunked_view, int64_t>; `view` is a view in
/// device memory (wholememory::device_view).
void write_pattern(const wholememory::chunked_view* view, std::int64_t begin, std::int64_t end,
                   std::int64_t value_shift, std::uint64_t salt, cudaStream_t stream);

/// Continuous memory: adds to *mismatches (device memory) the number of elements i in
/// [begin, end) of `base` that differ from pattern_value(i + value_shift, salt).
void count_mismatches(const void* base, std::int64_t begin, std::int64_t end,
                      std::int64_t value_shift, std::uint64_t salt, unsigned long long* mismatches,
                      cudaStream_t stream);

/// Chunked memory: the same through PtrGen<const chunked_view, int64_t>.
void count_mismatches(const wholememory::chunked_view* view, std::int64_t begin, std::int64_t end,
                      std::int64_t value_shift, std::uint64_t salt, unsigned long long* mismatches,
                      cudaStream_t stream);

}  // namespace wholestore_test
