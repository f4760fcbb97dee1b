/*
 * Row addressing shared by the gather/scatter kernels and the CPU path.
 *
 * A row_addresser turns a row number into the address of the row's first selected element
 * through a PtrGen over bytes, so continuous memory (plain arithmetic), chunked memory (part
 * lookup once per row) and dense buffers share one code path.  An index pointer of nullptr
 * means the identity (row i is list entry i), which lets one row loop serve gather (indexed
 * source), scatter (indexed destination) and the distributed pack/place steps.
 */
#pragma once

#include <wholememory/ptr_gen.hpp>

#include <cstddef>
#include <cstdint>

namespace wholememory::detail {

using plain_bytes = PtrGen<char, char>;
using chunked_bytes = PtrGen<const chunked_view, char>;

/// Address of row r: gen.At(r * stride_bytes + col_offset_bytes).
template <typename Gen>
struct row_addresser {
  Gen gen;
  std::size_t stride_bytes;
  std::size_t col_offset_bytes;

  WM_HOST_DEVICE char* row(std::int64_t r) const {
    return gen.At(
        static_cast<std::ptrdiff_t>(static_cast<std::size_t>(r) * stride_bytes + col_offset_bytes));
  }
};

/// Entry i of an index list, or i itself when the list is nullptr.
template <typename IndexT>
WM_HOST_DEVICE std::int64_t row_at(const IndexT* indices, std::int64_t i) {
  return indices == nullptr ? i : static_cast<std::int64_t>(indices[i]);
}

}  // namespace wholememory::detail
