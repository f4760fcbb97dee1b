// placeholder, being written: loading datasets into WholeMemory.
#include <graph/csr_graph.hpp>
#include <wholememory/error.hpp>

namespace wholestore::graph {
csr_graph load_graph(std::shared_ptr<wholememory::communicator>, const std::string&,
                     const load_options&, load_stats*) {
  WM_FAIL(wholememory::logic_error, "load_graph: not written yet");
}
}  // namespace wholestore::graph
