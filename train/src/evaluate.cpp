// Link-prediction scores (score_links, train/trainer.hpp) and the trainer's evaluation of
// the held-out edges with the input vectors (trainer::evaluate, trainer_impl.hpp).
#include "trainer_impl.hpp"

#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>

namespace wholestore::train {

link_scores score_links(const std::vector<double>& positive, const std::vector<double>& negative,
                        int hits_k) {
  WM_EXPECTS(!positive.empty() && !negative.empty(),
             "score_links: needs positives and negatives, got " << positive.size() << " and "
                                                                << negative.size());
  // Total on any input: a NaN score ranks as -infinity (below every number, tied with -inf),
  // so the sort's order is strict-weak and the tie loop below always advances.
  auto ranked = [](double s) {
    return std::isnan(s) ? -std::numeric_limits<double>::infinity() : s;
  };
  std::vector<std::pair<double, int>> all;
  all.reserve(positive.size() + negative.size());
  for (double s : positive) all.emplace_back(ranked(s), 1);
  for (double s : negative) all.emplace_back(ranked(s), 0);
  std::sort(all.begin(), all.end());
  // Mann-Whitney: each positive counts the negatives below it, and half of those tied with it.
  double wins = 0, negatives_below = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    double pos = 0, neg = 0;
    for (; j < all.size() && all[j].first == all[i].first; ++j) (all[j].second ? pos : neg) += 1;
    wins += pos * (negatives_below + 0.5 * neg);
    negatives_below += neg;
    i = j;
  }
  link_scores out;
  out.auc = wins / (static_cast<double>(positive.size()) * static_cast<double>(negative.size()));
  if (hits_k < 1 || static_cast<std::size_t>(hits_k) > negative.size()) {
    out.hits = 1.0;
  } else {
    std::vector<double> neg(negative.size());
    std::transform(negative.begin(), negative.end(), neg.begin(), ranked);
    std::nth_element(neg.begin(), neg.begin() + (hits_k - 1), neg.end(), std::greater<double>());
    const double threshold = neg[static_cast<std::size_t>(hits_k - 1)];
    std::size_t above = 0;
    for (double s : positive) above += ranked(s) > threshold ? 1 : 0;
    out.hits = static_cast<double>(above) / static_cast<double>(positive.size());
  }
  return out;
}

namespace detail {

std::vector<float> trainer::read_rows(const std::vector<std::int64_t>& nodes) {
  const std::size_t n = nodes.size(), dim = s_.dim;
  std::vector<float> out(n * dim);
  if (!s_.use_gpu) {
    input_.lookup_host({nodes.data(), wm::dtype::int64, n},
                       {out.data(), wm::dtype::float32, n, dim, dim}, s_.threads);
    return out;
  }
  wm::device_buffer idx(std::max<std::size_t>(n, 1) * 8, device_);
  wm::device_buffer rows(std::max<std::size_t>(n, 1) * dim * 4, device_);
  if (n) wm::copy_bytes(idx.data(), nodes.data(), n * 8);
  input_.lookup({idx.data(), wm::dtype::int64, n}, {rows.data(), wm::dtype::float32, n, dim, dim},
                stream_);
  sync();
  if (n) wm::copy_bytes(out.data(), rows.data(), n * dim * 4);
  return out;
}

link_scores trainer::evaluate(int epoch) {
  // Every rank computes the same scores (their tables are the same), a chunk of pairs at a
  // time so that a large graph's held-out set is never looked up whole.
  constexpr std::size_t chunk = std::size_t{1} << 18;
  const std::size_t dim = s_.dim;
  std::uint64_t nonfinite = 0;
  auto scores = [&](const std::vector<std::pair<std::int64_t, std::int64_t>>& list) {
    std::vector<double> out(list.size());
    std::vector<std::int64_t> nodes;
    for (std::size_t begin = 0; begin < list.size(); begin += chunk) {
      const std::size_t end = std::min(list.size(), begin + chunk);
      nodes.clear();
      for (std::size_t k = begin; k < end; ++k) {
        nodes.push_back(list[k].first);
        nodes.push_back(list[k].second);
      }
      const std::vector<float> rows = read_rows(nodes);
      for (std::size_t k = begin; k < end; ++k) {
        const float* a = rows.data() + 2 * (k - begin) * dim;
        const float* b = a + dim;
        double s = 0;
        for (std::size_t c = 0; c < dim; ++c)
          s += static_cast<double>(a[c]) * static_cast<double>(b[c]);
        out[k] = s;
        nonfinite += std::isfinite(s) ? 0 : 1;
      }
    }
    return out;
  };
  const std::vector<double> positive = scores(split_.test_edges);
  const std::vector<double> negative = scores(split_.test_non_edges);
  // Every rank reads the same rows, so every rank stops here alike.
  if (nonfinite) {
    diverged("by epoch " + std::to_string(epoch) + "'s end",
             std::to_string(nonfinite) + " of the " +
                 std::to_string(positive.size() + negative.size()) +
                 " held-out pairs scored NaN or infinite (the embeddings hold NaN or Inf)");
  }
  return score_links(positive, negative, s_.hits_k);
}

}  // namespace detail
}  // namespace wholestore::train
