// placeholder, being written: the CPU sampler.
#include <graph/sampling.hpp>
#include <wholememory/error.hpp>

namespace wholestore::graph {
sample_result sample_host(const csr_graph&, const std::int64_t*, std::size_t,
                          const sample_options&, unsigned) {
  WM_FAIL(wholememory::logic_error, "sample_host: not written yet");
}
}  // namespace wholestore::graph
