// The sampler's run() with 64-bit relabel keys: graphs of 2^32 - 1 nodes or more
// (sampling_run.cuh).
#include "sampling_run.cuh"

namespace wholestore::graph {

template std::vector<device_block> gpu_sampler::impl::run<unsigned long long>(
    const std::int64_t*, std::size_t, const sample_options&, const std::uint64_t*, cudaStream_t,
    bool, bool*);

}  // namespace wholestore::graph
