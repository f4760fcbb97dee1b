// Builds without CUDA: the GPU paths of apply_gradients and sgns_gradients report that they
// are missing.
#include "table_impl.hpp"

#include <embedding/sgns.hpp>
#include <embedding/table.hpp>
#include <wholememory/error.hpp>

namespace wholestore::embedding {

namespace detail {
struct gpu_workspace {};
void destroy_gpu_workspace(gpu_workspace* ws) noexcept { delete ws; }
}  // namespace detail

void table::apply_gradients(const wholememory::index_array&, const wholememory::dense_matrix&,
                            float, cudaStream_t, const apply_options&) {
  WM_FAIL(wholememory::logic_error,
          "apply_gradients runs on a GPU and wholestore was built without CUDA; use "
          "apply_gradients_host");
}

void table::apply_scaled_gradients(const wholememory::index_array&, const scaled_rows&, float,
                                   cudaStream_t, const apply_options&) {
  WM_FAIL(wholememory::logic_error,
          "apply_scaled_gradients runs on a GPU and wholestore was built without CUDA; use "
          "apply_gradients_host with the gradient rows");
}

void sgns_gradients(const sgns_batch&, cudaStream_t) {
  WM_FAIL(wholememory::logic_error,
          "sgns_gradients runs on a GPU and wholestore was built without CUDA; use "
          "sgns_gradients_host");
}

void sgns_gradients_from_tables(const sgns_table_batch&, cudaStream_t) {
  WM_FAIL(wholememory::logic_error,
          "sgns_gradients_from_tables runs on a GPU and wholestore was built without CUDA; use "
          "table::lookup_host and sgns_gradients_host");
}

}  // namespace wholestore::embedding
