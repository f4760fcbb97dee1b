// placeholder, being written: the GPU sampler (CUDA), not written yet.
#include <graph/sampling.hpp>
#include <wholememory/error.hpp>

namespace wholestore::graph {
struct gpu_sampler::impl {};
gpu_sampler::gpu_sampler(const csr_graph&) {
  WM_FAIL(wholememory::logic_error, "gpu_sampler: not written yet");
}
gpu_sampler::~gpu_sampler() = default;
std::vector<device_block> gpu_sampler::sample(const std::int64_t*, std::size_t,
                                              const sample_options&, cudaStream_t) {
  WM_FAIL(wholememory::logic_error, "gpu_sampler: not written yet");
}
block device_block::to_host(cudaStream_t) const {
  WM_FAIL(wholememory::logic_error, "device_block: not written yet");
}
}  // namespace wholestore::graph
