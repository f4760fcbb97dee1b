// sgns_gradients_host against a float64 reference: the loss and every gradient element, and
// the gradient against central finite differences of the float64 loss on a tiny example; the
// deterministic exp and softplus against the C library; the same bits for any thread count;
// dims that are not a multiple of 32, K = 0, zero pairs; scores far outside the clamp; bad
// arguments.
#include <embedding/detail/sgns_math.hpp>
#include <embedding/sgns.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using namespace wholestore::embedding;

float uniform_value(std::uint64_t seed, std::uint64_t i, float scale) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return scale * (static_cast<float>(x >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f);
}

struct problem {
  std::size_t pairs, dim;
  int k;
  std::vector<float> centers, targets;
  problem(std::size_t p, int negatives, std::size_t d, float scale, std::uint64_t seed)
      : pairs(p), dim(d), k(negatives), centers(p * d), targets(p * (negatives + 1) * d) {
    for (std::size_t i = 0; i < centers.size(); ++i) centers[i] = uniform_value(seed, i, scale);
    for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = uniform_value(seed + 1, i, scale);
  }
};

struct result {
  std::vector<float> center_grads, target_grads, losses;
};

result run_host(const problem& p, unsigned threads) {
  result r;
  r.center_grads.assign(p.centers.size(), -7.0f);
  r.target_grads.assign(p.targets.size(), -7.0f);
  r.losses.assign(p.pairs, -7.0f);
  sgns_batch b;
  b.centers = p.centers.data();
  b.targets = p.targets.data();
  b.pairs = p.pairs;
  b.negatives = p.k;
  b.dim = p.dim;
  b.center_grads = r.center_grads.data();
  b.target_grads = r.target_grads.data();
  b.losses = r.losses.data();
  sgns_gradients_host(b, threads);
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The loss of pair i in float64 from (possibly perturbed) float64 rows.
double pair_loss(const std::vector<double>& u, const std::vector<double>& t, std::size_t dim,
                 int k) {
  double loss = 0;
  for (int j = 0; j <= k; ++j) {
    double s = 0;
    for (std::size_t c = 0; c < dim; ++c) s += u[c] * t[j * dim + c];
    loss += j == 0 ? std::log1p(std::exp(-s)) : std::log1p(std::exp(s));
  }
  return loss;
}

TEST(SgnsMath, DeterministicExpMatchesLibraryExp) {
  for (int i = -4000; i <= 4000; ++i) {
    const float x = static_cast<float>(i) * 0.005f;
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(detail::det_exp(x), want, 3e-7 * want) << "x = " << x;
  }
  // Clamped outside [-20, 20].
  EXPECT_EQ(detail::det_exp(100.0f), detail::det_exp(20.0f));
  EXPECT_EQ(detail::det_exp(-1e30f), detail::det_exp(-20.0f));
}

TEST(SgnsMath, SoftplusAndCoefficientsMatchFloat64) {
  for (int i = -2500; i <= 2500; ++i) {
    const float y = static_cast<float>(i) * 0.008f;
    const double yd = y;
    EXPECT_NEAR(detail::softplus(y), std::log1p(std::exp(yd)), 2e-6 * (1 + std::fabs(yd)))
        << "y = " << y;
    EXPECT_NEAR(detail::negative_coefficient(y), sigmoid(yd), 3e-7) << "y = " << y;
    EXPECT_NEAR(detail::context_coefficient(y), sigmoid(yd) - 1.0, 3e-7) << "y = " << y;
  }
  EXPECT_TRUE(std::isfinite(detail::softplus(1e30f)));
  EXPECT_NEAR(detail::softplus(1e30f), 20.0f, 1e-5);
  EXPECT_GE(detail::softplus(-1e30f), 0.0f);
}

TEST(SgnsMath, DotProductIsTheLaneOrderSum) {
  // dot_host must equal the 32 lane_dot partials reduced by the butterfly.
  for (std::size_t dim : {1, 5, 31, 32, 33, 100, 128, 257}) {
    problem p(1, 0, dim, 1.0f, dim);
    float partial[detail::sgns_lanes];
    for (int l = 0; l < detail::sgns_lanes; ++l)
      partial[l] = detail::lane_dot(p.centers.data(), p.targets.data(), dim, l);
    const float want = detail::butterfly_sum(partial);
    const float got = detail::dot_host(p.centers.data(), p.targets.data(), dim);
    EXPECT_EQ(std::memcmp(&want, &got, sizeof(float)), 0) << "dim " << dim;
    double ref = 0;
    for (std::size_t c = 0; c < dim; ++c)
      ref += static_cast<double>(p.centers[c]) * static_cast<double>(p.targets[c]);
    EXPECT_NEAR(got, ref, 1e-5 * static_cast<double>(dim)) << "dim " << dim;
  }
}

// The loss and gradients against the float64 formulas, over dims and K.
TEST(SgnsHost, MatchesFloat64Reference) {
  for (std::size_t dim : {1, 7, 32, 33, 128}) {
    for (int k : {0, 1, 5}) {
      problem p(37, k, dim, 0.6f, dim * 10 + static_cast<std::size_t>(k));
      const result r = run_host(p, 2);
      const std::size_t per = static_cast<std::size_t>(k) + 1;
      for (std::size_t i = 0; i < p.pairs; ++i) {
        std::vector<double> s(per), coef(per);
        double loss = 0;
        for (std::size_t j = 0; j < per; ++j) {
          for (std::size_t c = 0; c < dim; ++c)
            s[j] += static_cast<double>(p.centers[i * dim + c]) *
                    static_cast<double>(p.targets[(i * per + j) * dim + c]);
          coef[j] = j == 0 ? sigmoid(s[j]) - 1.0 : sigmoid(s[j]);
          loss += j == 0 ? std::log1p(std::exp(-s[j])) : std::log1p(std::exp(s[j]));
        }
        ASSERT_NEAR(r.losses[i], loss, 1e-5 * (1 + loss)) << "pair " << i << " dim " << dim;
        for (std::size_t c = 0; c < dim; ++c) {
          double gu = 0;
          for (std::size_t j = 0; j < per; ++j)
            gu += coef[j] * static_cast<double>(p.targets[(i * per + j) * dim + c]);
          ASSERT_NEAR(r.center_grads[i * dim + c], gu, 1e-5) << "pair " << i << " col " << c;
          for (std::size_t j = 0; j < per; ++j) {
            ASSERT_NEAR(r.target_grads[(i * per + j) * dim + c],
                        coef[j] * static_cast<double>(p.centers[i * dim + c]), 1e-5)
                << "pair " << i << " target " << j << " col " << c;
          }
        }
      }
    }
  }
}

// Central finite differences of the float64 loss, element by element, on a tiny example.
TEST(SgnsHost, GradientMatchesFiniteDifferences) {
  const std::size_t dim = 6;
  const int k = 3;
  problem p(4, k, dim, 0.9f, 77);
  const result r = run_host(p, 1);
  const std::size_t per = k + 1;
  const double h = 1e-6;
  for (std::size_t i = 0; i < p.pairs; ++i) {
    std::vector<double> u(dim), t(per * dim);
    for (std::size_t c = 0; c < dim; ++c) u[c] = p.centers[i * dim + c];
    for (std::size_t e = 0; e < per * dim; ++e) t[e] = p.targets[i * per * dim + e];
    for (std::size_t c = 0; c < dim; ++c) {
      const double keep = u[c];
      u[c] = keep + h;
      const double up = pair_loss(u, t, dim, k);
      u[c] = keep - h;
      const double down = pair_loss(u, t, dim, k);
      u[c] = keep;
      EXPECT_NEAR(r.center_grads[i * dim + c], (up - down) / (2 * h), 2e-6)
          << "d loss / d center[" << c << "] of pair " << i;
    }
    for (std::size_t e = 0; e < per * dim; ++e) {
      const double keep = t[e];
      t[e] = keep + h;
      const double up = pair_loss(u, t, dim, k);
      t[e] = keep - h;
      const double down = pair_loss(u, t, dim, k);
      t[e] = keep;
      EXPECT_NEAR(r.target_grads[i * per * dim + e], (up - down) / (2 * h), 2e-6)
          << "d loss / d target row " << e / dim << " col " << e % dim << " of pair " << i;
    }
  }
}

TEST(SgnsHost, SameBitsForAnyThreadCount) {
  problem p(5000, 5, 100, 0.3f, 9);
  const result one = run_host(p, 1);
  for (unsigned threads : {2u, 3u, 8u}) {
    const result r = run_host(p, threads);
    EXPECT_EQ(std::memcmp(one.center_grads.data(), r.center_grads.data(),
                          one.center_grads.size() * sizeof(float)),
              0)
        << threads << " threads";
    EXPECT_EQ(std::memcmp(one.target_grads.data(), r.target_grads.data(),
                          one.target_grads.size() * sizeof(float)),
              0)
        << threads << " threads";
    EXPECT_EQ(std::memcmp(one.losses.data(), r.losses.data(), one.losses.size() * sizeof(float)), 0)
        << threads << " threads";
  }
}

// The integer loss sum adds llround(loss * scale) of every pair to what the word holds, the
// same for any thread count, with or without the losses written.
TEST(SgnsHost, LossUnitsAreTheRoundedSum) {
  problem p(3001, 5, 64, 0.4f, 21);
  const result r = run_host(p, 1);
  for (double scale : {16777216.0, 1.0, 1000.0}) {
    long long expected = -3;
    for (float l : r.losses) expected += std::llround(static_cast<double>(l) * scale);
    for (unsigned threads : {1u, 2u, 7u}) {
      std::vector<float> gu(p.centers.size()), gt(p.targets.size());
      sgns_batch b{p.centers.data(), p.targets.data(), p.pairs, p.k, p.dim,
                   gu.data(),        gt.data(),        nullptr};
      long long units = -3;
      b.loss_units = &units;
      b.loss_scale = scale;
      sgns_gradients_host(b, threads);
      EXPECT_EQ(units, expected) << "scale " << scale << ", " << threads << " threads";
    }
  }
}

TEST(SgnsHost, LargeScoresStayFinite) {
  problem p(3, 2, 16, 40.0f, 5);  // scores in the thousands: far outside the clamp
  const result r = run_host(p, 1);
  for (float v : r.losses) EXPECT_TRUE(std::isfinite(v));
  for (float v : r.center_grads) EXPECT_TRUE(std::isfinite(v));
  for (float v : r.target_grads) EXPECT_TRUE(std::isfinite(v));
}

// Rows holding NaN or Inf (a diverged table) mark their pairs: counted, NaN loss, no loss
// units (llround of NaN summed as a huge negative number before: issue 36's negative loss).
TEST(SgnsHost, NonFinitePairsAreCountedAndAddNoLossUnits) {
  problem p(500, 3, 24, 0.4f, 9);
  const result clean = run_host(p, 1);
  std::vector<std::size_t> poisoned;
  for (std::size_t i = 0; i < p.pairs; i += 7) {
    poisoned.push_back(i);
    const float bad = (i / 7) % 3 == 0 ? NAN : ((i / 7) % 3 == 1 ? INFINITY : -INFINITY);
    if ((i / 7) % 2 == 0) {
      p.centers[i * p.dim + (i % p.dim)] = bad;
    } else {  // in a negative's row: the pair's last target
      p.targets[(i * (p.k + 1) + p.k) * p.dim + (i % p.dim)] = bad;
    }
  }
  long long expected_units = 0;
  for (std::size_t i = 0; i < p.pairs; ++i)
    if (i % 7 != 0) expected_units += std::llround(static_cast<double>(clean.losses[i]) * 256.0);
  for (unsigned threads : {1u, 3u}) {
    std::vector<float> gu(p.centers.size()), gt(p.targets.size()), losses(p.pairs);
    sgns_batch b{p.centers.data(), p.targets.data(), p.pairs,      p.k, p.dim,
                 gu.data(),        gt.data(),        losses.data()};
    long long units = 0;
    unsigned long long nonfinite = 5;  // added to, like loss_units
    b.loss_units = &units;
    b.loss_scale = 256.0;
    b.nonfinite_pairs = &nonfinite;
    sgns_gradients_host(b, threads);
    EXPECT_EQ(nonfinite, 5 + poisoned.size()) << threads << " threads";
    EXPECT_EQ(units, expected_units) << threads << " threads";
    for (std::size_t i = 0; i < p.pairs; ++i)
      EXPECT_EQ(std::isnan(losses[i]), i % 7 == 0) << "pair " << i;
  }
}

TEST(SgnsHost, ZeroPairsAndNullLosses) {
  sgns_batch b;
  b.dim = 4;
  EXPECT_NO_THROW(sgns_gradients_host(b, 2));  // nothing to do, nothing touched
  problem p(3, 1, 4, 0.5f, 3);
  result want = run_host(p, 1);
  std::vector<float> gu(p.centers.size()), gt(p.targets.size());
  b = sgns_batch{p.centers.data(), p.targets.data(), p.pairs, 1, 4, gu.data(), gt.data(), nullptr};
  sgns_gradients_host(b, 1);
  EXPECT_EQ(gu, want.center_grads);
  EXPECT_EQ(gt, want.target_grads);
}

// The coefficients stand for the target rows: row q of target_grads is coef_q * u_i element by
// element, one rounded float32 product (what apply_scaled_gradients recomputes), and a batch
// with coefficients alone writes the same center gradients and losses.
TEST(SgnsHost, TargetCoefficientsTimesTheCenterAreTheTargetRows) {
  for (unsigned threads : {1u, 3u}) {
    problem p(777, 5, 33, 0.6f, 13);
    const result want = run_host(p, 1);
    const std::size_t per = static_cast<std::size_t>(p.k) + 1;
    std::vector<float> gu(p.centers.size()), losses(p.pairs), coefs(p.pairs * per, -7.0f);
    sgns_batch b{p.centers.data(), p.targets.data(), p.pairs,      p.k, p.dim,
                 gu.data(),        nullptr,          losses.data()};
    b.target_coefs = coefs.data();
    sgns_gradients_host(b, threads);
    EXPECT_EQ(gu, want.center_grads);
    EXPECT_EQ(losses, want.losses);
    for (std::size_t q = 0; q < coefs.size(); ++q) {
      const float* u = p.centers.data() + (q / per) * p.dim;
      for (std::size_t c = 0; c < p.dim; ++c) {
        const float product = coefs[q] * u[c];
        ASSERT_EQ(std::memcmp(&product, &want.target_grads[q * p.dim + c], sizeof(float)), 0)
            << "target row " << q << " column " << c << ", " << threads << " threads";
      }
    }
  }
}

TEST(SgnsHost, BadArgumentsNameTheProblem) {
  problem p(2, 1, 4, 0.5f, 3);
  std::vector<float> gu(p.centers.size()), gt(p.targets.size());
  sgns_batch b{p.centers.data(), p.targets.data(), 2, 1, 0, gu.data(), gt.data(), nullptr};
  try {
    sgns_gradients_host(b, 1);
    FAIL() << "dim 0 accepted";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("dim must be positive"), std::string::npos) << e.what();
  }
  b.dim = 4;
  b.negatives = -1;
  EXPECT_THROW(sgns_gradients_host(b, 1), wholememory::logic_error);
  b.negatives = 1;
  b.targets = nullptr;
  EXPECT_THROW(sgns_gradients_host(b, 1), wholememory::logic_error);
  b.targets = p.targets.data();
  b.target_grads = nullptr;  // and no coefficients: the targets' gradients go nowhere
  try {
    sgns_gradients_host(b, 1);
    FAIL() << "neither target_grads nor target_coefs: accepted";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("target_grads or target_coefs"), std::string::npos)
        << e.what();
  }
}

#if !defined(WHOLESTORE_HAS_CUDA)
TEST(SgnsHost, GpuPathRefusedWithoutCuda) {
  sgns_batch b;
  b.dim = 4;
  try {
    sgns_gradients(b, nullptr);
    FAIL() << "the GPU path ran in a build without CUDA";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("without CUDA"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
