// Builds without CUDA: the GPU path of walk_pairs.hpp reports that it is missing.
#include <graph/block_pairs.hpp>
#include <graph/walk_pairs.hpp>
#include <wholememory/error.hpp>

namespace wholestore::graph {

std::size_t gpu_window_pairs::build(const window_pairs_args&, cudaStream_t) {
  WM_FAIL(wholememory::logic_error,
          "gpu_window_pairs::build runs on a GPU and wholestore was built without CUDA; use "
          "window_pairs_host");
}

void gpu_block_pairs::build(const block_pairs_args&, cudaStream_t) {
  WM_FAIL(wholememory::logic_error,
          "gpu_block_pairs::build runs on a GPU and wholestore was built without CUDA; use "
          "block_pairs_host");
}

void edge_pairs(const csr_graph&, const edge_pairs_args&, cudaStream_t) {
  WM_FAIL(wholememory::logic_error,
          "edge_pairs runs on a GPU and wholestore was built without CUDA");
}

}  // namespace wholestore::graph
