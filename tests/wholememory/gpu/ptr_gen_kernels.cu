/*
 * Pattern kernels over PtrGen, one template per operation, instantiated for the continuous
 * (PtrGen<int64_t, int64_t>) and chunked (PtrGen<const chunked_view, int64_t>) generators.
 */
#include "wholememory/gpu/ptr_gen_kernels.hpp"

#include <wholememory/cuda_check.hpp>

#include <algorithm>
#include <cstdint>

namespace wholestore_test {
namespace {

constexpr int block_size = 256;
constexpr std::int64_t max_blocks = 4096;

int grid_size(std::int64_t elements) {
  return static_cast<int>(std::min<std::int64_t>(
      max_blocks, std::max<std::int64_t>(1, (elements + block_size - 1) / block_size)));
}

template <typename PtrGenT>
__global__ void write_pattern_kernel(PtrGenT gen, std::int64_t begin, std::int64_t end,
                                     std::int64_t value_shift, std::uint64_t salt) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = begin + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < end; i += stride) {
    *gen.At(i) = pattern_value(i + value_shift, salt);
  }
}

template <typename PtrGenT>
__global__ void count_mismatches_kernel(PtrGenT gen, std::int64_t begin, std::int64_t end,
                                        std::int64_t value_shift, std::uint64_t salt,
                                        unsigned long long* mismatches) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  unsigned long long local = 0;
  for (std::int64_t i = begin + static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < end; i += stride) {
    if (*gen.At(i) != pattern_value(i + value_shift, salt)) ++local;
  }
  if (local != 0) atomicAdd(mismatches, local);
}

template <typename PtrGenT>
void launch_write(PtrGenT gen, std::int64_t begin, std::int64_t end, std::int64_t value_shift,
                  std::uint64_t salt, cudaStream_t stream) {
  if (end <= begin) return;
  write_pattern_kernel<<<grid_size(end - begin), block_size, 0, stream>>>(gen, begin, end,
                                                                          value_shift, salt);
  WM_CUDA_CHECK_LAUNCH(stream);
}

template <typename PtrGenT>
void launch_count(PtrGenT gen, std::int64_t begin, std::int64_t end, std::int64_t value_shift,
                  std::uint64_t salt, unsigned long long* mismatches, cudaStream_t stream) {
  if (end <= begin) return;
  count_mismatches_kernel<<<grid_size(end - begin), block_size, 0, stream>>>(
      gen, begin, end, value_shift, salt, mismatches);
  WM_CUDA_CHECK_LAUNCH(stream);
}

using continuous_gen = wholememory::PtrGen<std::int64_t, std::int64_t>;
using chunked_gen = wholememory::PtrGen<const wholememory::chunked_view, std::int64_t>;

}  // namespace

void write_pattern(void* base, std::int64_t begin, std::int64_t end, std::int64_t value_shift,
                   std::uint64_t salt, cudaStream_t stream) {
  launch_write(continuous_gen(base), begin, end, value_shift, salt, stream);
}

void write_pattern(const wholememory::chunked_view* view, std::int64_t begin, std::int64_t end,
                   std::int64_t value_shift, std::uint64_t salt, cudaStream_t stream) {
  launch_write(chunked_gen(view), begin, end, value_shift, salt, stream);
}

void count_mismatches(const void* base, std::int64_t begin, std::int64_t end,
                      std::int64_t value_shift, std::uint64_t salt, unsigned long long* mismatches,
                      cudaStream_t stream) {
  launch_count(continuous_gen(const_cast<void*>(base)), begin, end, value_shift, salt, mismatches,
               stream);
}

void count_mismatches(const wholememory::chunked_view* view, std::int64_t begin, std::int64_t end,
                      std::int64_t value_shift, std::uint64_t salt, unsigned long long* mismatches,
                      cudaStream_t stream) {
  launch_count(chunked_gen(view), begin, end, value_shift, salt, mismatches, stream);
}

}  // namespace wholestore_test
