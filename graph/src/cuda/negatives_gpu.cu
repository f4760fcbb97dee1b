// negative_sampler::sample on the GPU: one thread per draw, the draw of negatives.hpp.
#include <graph/negatives.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cuda_runtime.h>

#include <algorithm>

namespace wholestore::graph {

namespace wm = wholememory;

namespace {

template <typename Table>
__global__ void draw_kernel(Table table, std::uint64_t nodes, std::uint64_t key,
                            std::uint64_t first, std::size_t count, std::int64_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = detail::alias_draw(table, nodes, key, first + i);
}

}  // namespace

void negative_sampler::sample(std::uint64_t seed, std::uint64_t first_draw, std::size_t count,
                              std::int64_t* out, cudaStream_t stream) const {
  WM_EXPECTS(count == 0 || out != nullptr, "negative_sampler::sample: null output");
  if (count == 0) return;
  const std::uint64_t key = detail::negatives_key(seed);
  const unsigned blocks =
      static_cast<unsigned>(std::clamp<std::size_t>((count + 255) / 256, 1, 1u << 16));
  if (table_.type() == wm::memory_type::continuous) {
    draw_kernel<<<blocks, 256, 0, stream>>>(wm::PtrGen<const alias_entry, const alias_entry>(
                                                static_cast<const alias_entry*>(table_.data())),
                                            nodes_, key, first_draw, count, out);
  } else {
    draw_kernel<<<blocks, 256, 0, stream>>>(wm::PtrGen<const wm::chunked_view, const alias_entry>(
                                                table_.device_view(wm::current_device())),
                                            nodes_, key, first_draw, count, out);
  }
  WM_CUDA_CHECK_LAUNCH(stream);
}

}  // namespace wholestore::graph
