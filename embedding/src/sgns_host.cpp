// sgns_gradients_host: the CPU path of sgns.hpp, pairs split over threads, each pair's outputs
// written by one thread with the shared arithmetic of detail/sgns_math.hpp.
#include "parallel.hpp"
#include "sgns_common.hpp"

#include <embedding/detail/sgns_math.hpp>
#include <embedding/sgns.hpp>
#include <wholememory/gather.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace wholestore::embedding {

void sgns_gradients_host(const sgns_batch& b, unsigned threads) {
  detail::check_sgns_batch(b, "sgns_gradients_host");
  if (threads == 0) threads = wholememory::default_host_threads();
  const std::size_t dim = b.dim;
  const std::size_t per_pair = static_cast<std::size_t>(b.negatives) + 1;
  std::atomic<long long> units{0};
  std::atomic<unsigned long long> nonfinite{0};
  detail::parallel_ranges(b.pairs, threads, 256, [&](std::size_t begin, std::size_t end) {
    std::vector<float> coef(per_pair);
    long long my_units = 0;
    unsigned long long my_nonfinite = 0;
    for (std::size_t i = begin; i < end; ++i) {
      const float* u = b.centers + i * dim;
      const float* t0 = b.targets + i * per_pair * dim;
      float loss = 0.0f;
      bool finite = true;
      for (std::size_t j = 0; j < per_pair; ++j) {
        const float s = detail::dot_host(u, t0 + j * dim, dim);
        finite = finite && detail::finite_score(s);
        if (j == 0) {
          coef[j] = detail::context_coefficient(s);
          loss = detail::softplus(-s);
        } else {
          coef[j] = detail::negative_coefficient(s);
          loss = loss + detail::softplus(s);
        }
      }
      if (!finite) {
        loss = std::numeric_limits<float>::quiet_NaN();
        ++my_nonfinite;
      } else if (b.loss_units) {
        my_units += std::llround(static_cast<double>(loss) * b.loss_scale);
      }
      if (b.losses) b.losses[i] = loss;
      float* gu = b.center_grads + i * dim;
      for (std::size_t c = 0; c < dim; ++c) gu[c] = coef[0] * t0[c];
      for (std::size_t j = 1; j < per_pair; ++j) {
        const float* t = t0 + j * dim;
        for (std::size_t c = 0; c < dim; ++c) gu[c] = gu[c] + coef[j] * t[c];
      }
      if (b.target_coefs) std::copy(coef.begin(), coef.end(), b.target_coefs + i * per_pair);
      if (b.target_grads) {
        float* g0 = b.target_grads + i * per_pair * dim;
        for (std::size_t j = 0; j < per_pair; ++j) {
          float* g = g0 + j * dim;
          for (std::size_t c = 0; c < dim; ++c) g[c] = coef[j] * u[c];
        }
      }
    }
    units += my_units;
    nonfinite += my_nonfinite;
  });
  if (b.loss_units) *b.loss_units += units.load();
  if (b.nonfinite_pairs) *b.nonfinite_pairs += nonfinite.load();
}

}  // namespace wholestore::embedding
