// Argument checks of sgns_gradients and sgns_gradients_host (the same on both paths).
#pragma once

#include <embedding/sgns.hpp>
#include <wholememory/error.hpp>

namespace wholestore::embedding::detail {

inline void check_sgns_batch(const sgns_batch& b, const char* who) {
  WM_EXPECTS(b.dim > 0, who << ": dim must be positive, got 0");
  WM_EXPECTS(b.negatives >= 0, who << ": negatives must be >= 0, got " << b.negatives);
  WM_EXPECTS(b.pairs == 0 ||
                 (b.centers && b.targets && b.center_grads && (b.target_grads || b.target_coefs)),
             who << ": centers, targets, center_grads and target_grads or target_coefs must be "
                    "set for "
                 << b.pairs << " pairs");
}

inline void check_sgns_table_batch(const sgns_table_batch& b) {
  const char* who = "sgns_gradients_from_tables";
  WM_EXPECTS(b.out.dim > 0, who << ": dim must be positive, got 0");
  WM_EXPECTS(b.out.negatives >= 0, who << ": negatives must be >= 0, got " << b.out.negatives);
  for (const table_view* v : {&b.input, &b.output}) {
    const char* name = v == &b.input ? "input" : "output";
    WM_EXPECTS(v->dtype == wholememory::dtype::float32, who << ": the " << name
                                                            << " table must be float32, it is "
                                                            << wholememory::dtype_name(v->dtype));
    WM_EXPECTS(v->dim == b.out.dim, who << ": the " << name << " table has dim " << v->dim
                                        << ", the batch " << b.out.dim);
    WM_EXPECTS(b.out.pairs == 0 || v->parts != nullptr,
               who << ": the " << name << " table's view is empty");
  }
  WM_EXPECTS(b.out.pairs == 0 || (b.center_rows && b.target_rows && b.first_bad &&
                                  b.out.center_grads && (b.out.target_grads || b.out.target_coefs)),
             who << ": center_rows, target_rows, first_bad, center_grads and target_grads or "
                    "target_coefs must be set for "
                 << b.out.pairs << " pairs");
}

}  // namespace wholestore::embedding::detail
