// The one boundary where runtime choices (table dtype, gradient dtype, optimizer) become
// template parameters, for the CPU loops and the kernel launchers alike.
#pragma once

#include <embedding/table.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>

#include <type_traits>

namespace wholestore::embedding::detail {

/// Calls f(T{}) with T = float, half_t or bfloat16_t for float32, float16, bfloat16; throws
/// logic_error naming `what` and the dtype otherwise.
template <typename F>
decltype(auto) dispatch_float_type(wholememory::dtype t, const char* what, F&& f) {
  switch (t) {
    case wholememory::dtype::float32:
      return f(float{});
    case wholememory::dtype::float16:
      return f(wholememory::half_t{});
    case wholememory::dtype::bfloat16:
      return f(wholememory::bfloat16_t{});
    default:
      WM_FAIL(wholememory::logic_error,
              what << " must be float32, float16 or bfloat16, not " << wholememory::dtype_name(t));
  }
}

template <optimizer_kind K>
using optimizer_constant = std::integral_constant<optimizer_kind, K>;

/// Calls f(optimizer_constant<k>{}).
template <typename F>
decltype(auto) dispatch_optimizer(optimizer_kind k, F&& f) {
  switch (k) {
    case optimizer_kind::sgd:
      return f(optimizer_constant<optimizer_kind::sgd>{});
    case optimizer_kind::adam:
      return f(optimizer_constant<optimizer_kind::adam>{});
    case optimizer_kind::adagrad:
      return f(optimizer_constant<optimizer_kind::adagrad>{});
    case optimizer_kind::rowwise_adagrad:
      return f(optimizer_constant<optimizer_kind::rowwise_adagrad>{});
    case optimizer_kind::rmsprop:
      return f(optimizer_constant<optimizer_kind::rmsprop>{});
  }
  WM_FAIL(wholememory::logic_error, "unknown optimizer kind " << static_cast<int>(k));
}

}  // namespace wholestore::embedding::detail
