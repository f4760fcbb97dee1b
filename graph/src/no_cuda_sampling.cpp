// The GPU sampler and walker in builds without CUDA: every entry point throws logic_error.
#include <graph/negatives.hpp>
#include <graph/sampling.hpp>
#include <graph/walks.hpp>
#include <wholememory/error.hpp>

namespace wholestore::graph {
struct gpu_sampler::impl {};
gpu_sampler::gpu_sampler(const csr_graph&) {
  WM_FAIL(wholememory::logic_error, "gpu_sampler: this build has no CUDA");
}
gpu_sampler::~gpu_sampler() = default;
bool gpu_sampler::served_by_owners() const { return false; }

std::uint64_t gpu_sampler::padded_hops() const { return 0; }
std::vector<device_block> gpu_sampler::sample(const std::int64_t*, std::size_t,
                                              const sample_options&, cudaStream_t) {
  WM_FAIL(wholememory::logic_error, "gpu_sampler: this build has no CUDA");
}
block device_block::to_host(cudaStream_t) const {
  WM_FAIL(wholememory::logic_error, "device_block: this build has no CUDA");
}
gpu_walker::gpu_walker(const csr_graph& graph) : graph_(&graph) {
  WM_FAIL(wholememory::logic_error, "gpu_walker: this build has no CUDA");
}
void gpu_walker::walk(const std::int64_t*, std::size_t, const walk_options&, std::int64_t*,
                      cudaStream_t) {
  WM_FAIL(wholememory::logic_error, "gpu_walker: this build has no CUDA");
}
void negative_sampler::sample(std::uint64_t, std::uint64_t, std::size_t, std::int64_t*,
                              cudaStream_t) const {
  WM_FAIL(wholememory::logic_error, "negative_sampler::sample: this build has no CUDA");
}
}  // namespace wholestore::graph
