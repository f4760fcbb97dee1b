// The fused optimizer kernel's launcher: one warp per touched row of the owner's sorted list.
// Its 15 instantiations (3 table dtypes x 5 optimizers) live in update_rows.cu alone.
#pragma once

#include <embedding/detail/optimizer_update.hpp>
#include <embedding/table.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::embedding::detail {

/// What the kernel reads and writes.  The received entries are sorted by key (global row),
/// ties in received (global batch) order: order[k] is the received position of sorted entry k.
struct update_rows_args {
  const std::uint64_t* sorted_keys = nullptr;  ///< m global rows, ascending
  const std::uint32_t* order = nullptr;        ///< m received positions
  const float* grads = nullptr;                ///< received rows, m x dim, float32
  std::size_t m = 0;
  std::size_t dim = 0;
  std::uint64_t row_begin = 0;  ///< first row of the own part
  void* weights = nullptr;      ///< own part of the weights (table dtype)
  float* state0 = nullptr;      ///< own part of state 0 (m, or the accumulator), or nullptr
  float* state1 = nullptr;      ///< own part of state 1 (Adam's v), or nullptr
  update_params params{};
};

/// Enqueues the update of every run of equal keys on `stream`.
void launch_update_rows(wholememory::dtype table_type, optimizer_kind kind,
                        const update_rows_args& args, cudaStream_t stream);

}  // namespace wholestore::embedding::detail
