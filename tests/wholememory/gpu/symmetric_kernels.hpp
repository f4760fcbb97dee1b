// Test kernels over symmetric memory (symmetric_kernels.cu): enqueued on `stream` on the current
// device, no synchronization.
#pragma once

#include <wholememory/stream.hpp>
#include <wholememory/symmetric.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore_test {

WM_HOST_DEVICE std::uint64_t symmetric_value(std::size_t i, std::uint64_t salt) {
  return (static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ull) ^ salt;
}

/// Element i of `rank`'s block = symmetric_value(i, salt), for i < n.
void write_symmetric(wholememory::symmetric_accessor<std::uint64_t> at, int rank, std::size_t n,
                     std::uint64_t salt, cudaStream_t stream);

/// *wrong += the elements i < n of `rank`'s block that differ from symmetric_value(i, salt).
void count_symmetric_mismatches(wholememory::symmetric_accessor<std::uint64_t> at, int rank,
                                std::size_t n, std::uint64_t salt, unsigned long long* wrong,
                                cudaStream_t stream);

}  // namespace wholestore_test
