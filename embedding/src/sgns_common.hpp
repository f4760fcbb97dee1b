// Argument checks of sgns_gradients and sgns_gradients_host (the same on both paths).
#pragma once

#include <embedding/sgns.hpp>
#include <wholememory/error.hpp>

namespace wholestore::embedding::detail {

inline void check_sgns_batch(const sgns_batch& b, const char* who) {
  WM_EXPECTS(b.dim > 0, who << ": dim must be positive, got 0");
  WM_EXPECTS(b.negatives >= 0, who << ": negatives must be >= 0, got " << b.negatives);
  WM_EXPECTS(b.pairs == 0 || (b.centers && b.targets && b.center_grads && b.target_grads),
             who << ": centers, targets, center_grads and target_grads must be set for " << b.pairs
                 << " pairs");
}

}  // namespace wholestore::embedding::detail
