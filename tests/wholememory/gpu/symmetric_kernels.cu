// Kernels of the symmetric-memory GPU test: a rank writes a pattern into any rank's block and
// counts the elements of any rank's block that differ from a pattern, through the accessor.
#include "wholememory/gpu/symmetric_kernels.hpp"

#include <wholememory/cuda_check.hpp>

namespace wholestore_test {
namespace {

__global__ void write_kernel(wholememory::symmetric_accessor<std::uint64_t> at, int rank,
                             std::size_t n, std::uint64_t salt) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    *at(rank, i) = symmetric_value(i, salt);
}

__global__ void count_kernel(wholememory::symmetric_accessor<std::uint64_t> at, int rank,
                             std::size_t n, std::uint64_t salt, unsigned long long* wrong) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride)
    mine += *at(rank, i) != symmetric_value(i, salt) ? 1 : 0;
  if (mine) atomicAdd(wrong, mine);
}

}  // namespace

void write_symmetric(wholememory::symmetric_accessor<std::uint64_t> at, int rank, std::size_t n,
                     std::uint64_t salt, cudaStream_t stream) {
  write_kernel<<<256, 256, 0, stream>>>(at, rank, n, salt);
  WM_CUDA_CHECK_LAUNCH(stream);
}

void count_symmetric_mismatches(wholememory::symmetric_accessor<std::uint64_t> at, int rank,
                                std::size_t n, std::uint64_t salt, unsigned long long* wrong,
                                cudaStream_t stream) {
  count_kernel<<<256, 256, 0, stream>>>(at, rank, n, salt, wrong);
  WM_CUDA_CHECK_LAUNCH(stream);
}

}  // namespace wholestore_test
