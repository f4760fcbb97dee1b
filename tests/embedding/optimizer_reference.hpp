/*
 * A float64 reference of the sparse optimizers, written from their definitions and nothing
 * else: plain loops over the global batch in order, duplicates summed per row, then weight
 * decay and the update of every touched row, in double.  Only the stored weights are rounded
 * to the table dtype after each step, as the table stores them.
 */
#pragma once

#include "embedding/embedding_test_util.hpp"

#include <cmath>
#include <cstdint>
#include <map>
#include <vector>

namespace wholestore_test::embed {

struct reference_table {
  std::size_t rows = 0, dim = 0;
  dtype type = dtype::float32;
  optimizer_options opt;
  std::vector<double> w;       // rows x dim
  std::vector<double> s0, s1;  // m and v, or the accumulator (rows x dim, or rows)
  /// The states again, computed from the gradient magnitudes (|g| summed as sum of |g_i| plus
  /// |decay|): the scale of the rounding error that cancelling gradients leave in s0 and s1.
  std::vector<double> scale0, scale1;
  std::uint64_t step = 0;

  /// Starts from the given weights (rows x dim) and the optimizer's initial state.
  reference_table(std::size_t rows_, std::size_t dim_, dtype type_, optimizer_options opt_,
                  std::vector<double> weights)
      : rows(rows_), dim(dim_), type(type_), opt(opt_), w(std::move(weights)) {
    const double start = opt.kind == optimizer_kind::adam ? 0.0 : opt.initial_accumulator;
    const std::size_t cols = opt.kind == optimizer_kind::rowwise_adagrad ? 1 : dim;
    if (opt.kind != optimizer_kind::sgd) s0.assign(rows * cols, start);
    if (opt.kind == optimizer_kind::adam) s1.assign(rows * dim, 0.0);
    scale0 = s0;
    scale1 = s1;
  }

  /// One step on the global batch: index[i] with gradient row grads[i * dim ...].
  void apply(const std::vector<std::int64_t>& index, const std::vector<double>& grads, double lr) {
    ++step;
    std::map<std::int64_t, std::vector<double>> summed, magnitude;
    for (std::size_t i = 0; i < index.size(); ++i) {
      auto [it, fresh] = summed.try_emplace(index[i], std::vector<double>(dim, 0.0));
      auto [mt, unused] = magnitude.try_emplace(index[i], std::vector<double>(dim, 0.0));
      for (std::size_t c = 0; c < dim; ++c) {
        it->second[c] += grads[i * dim + c];
        mt->second[c] += std::fabs(grads[i * dim + c]);
      }
    }
    const double wd = opt.weight_decay, b1 = opt.beta1, b2 = opt.beta2, eps = opt.eps;
    const double alpha = opt.alpha;
    for (auto& [row, g] : summed) {
      double* wr = &w[row * dim];
      std::vector<double>& ga = magnitude[row];
      for (std::size_t c = 0; c < dim; ++c) {
        g[c] += wd * wr[c];
        ga[c] += std::fabs(wd * wr[c]);
      }
      double row_mean_sq = 0, row_mean_sq_scale = 0;
      for (std::size_t c = 0; c < dim; ++c) {
        row_mean_sq += g[c] * g[c] / static_cast<double>(dim);
        row_mean_sq_scale += ga[c] * ga[c] / static_cast<double>(dim);
      }
      if (opt.kind == optimizer_kind::rowwise_adagrad) {
        s0[row] += row_mean_sq;
        scale0[row] += row_mean_sq_scale;
      }
      for (std::size_t c = 0; c < dim; ++c) {
        const std::size_t e = row * dim + c;
        double next = wr[c];
        switch (opt.kind) {
          case optimizer_kind::sgd:
            next = wr[c] - lr * g[c];
            break;
          case optimizer_kind::adam: {
            s0[e] = b1 * s0[e] + (1 - b1) * g[c];
            s1[e] = b2 * s1[e] + (1 - b2) * g[c] * g[c];
            scale0[e] = b1 * scale0[e] + (1 - b1) * ga[c];
            scale1[e] = b2 * scale1[e] + (1 - b2) * ga[c] * ga[c];
            const double m_hat = s0[e] / (1 - std::pow(b1, static_cast<double>(step)));
            const double v_hat = s1[e] / (1 - std::pow(b2, static_cast<double>(step)));
            next = wr[c] - lr * m_hat / (std::sqrt(v_hat) + eps);
            break;
          }
          case optimizer_kind::adagrad:
            s0[e] += g[c] * g[c];
            scale0[e] += ga[c] * ga[c];
            next = wr[c] - lr * g[c] / (std::sqrt(s0[e]) + eps);
            break;
          case optimizer_kind::rowwise_adagrad:
            next = wr[c] - lr * g[c] / (std::sqrt(s0[row]) + eps);
            break;
          case optimizer_kind::rmsprop:
            s0[e] = alpha * s0[e] + (1 - alpha) * g[c] * g[c];
            scale0[e] = alpha * scale0[e] + (1 - alpha) * ga[c] * ga[c];
            next = wr[c] - lr * g[c] / (std::sqrt(s0[e]) + eps);
            break;
        }
        wr[c] = round_to(type, next);
      }
    }
  }
};

}  // namespace wholestore_test::embed
