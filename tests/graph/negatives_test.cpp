// Negative sampling: draws against the exact degree^0.75 and uniform distributions
// (chi-square), nodes without out-edges never drawn, probability() equal to the normalized
// weights, the same draws for any thread count, split, memory type and rank count, and the
// errors for an edgeless graph and a distributed table.
#include "common/multiprocess.hpp"

#include <graph/negatives.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

namespace wm = wholememory;
using wholestore::graph::negative_options;
using wholestore::graph::negative_sampler;

std::shared_ptr<wm::communicator> solo_comm() {
  auto bs = wm::make_thread_bootstraps(1);
  return wm::make_host_communicator(std::shared_ptr<wm::bootstrap>(std::move(bs[0])));
}

/// Row offsets of a graph with these out-degrees.
std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& degrees) {
  std::vector<std::int64_t> off = {0};
  for (std::int64_t d : degrees) off.push_back(off.back() + d);
  return off;
}

double chi2_critical_001(std::size_t dof) {
  static const double table[] = {10.83, 13.82, 16.27, 18.47, 20.52,
                                 22.46, 24.32, 26.12, 27.88, 29.59};
  return table[dof - 1];
}

TEST(NegativeSampling, DrawsFollowDegreeToThePowerAndUniform) {
  const std::vector<std::int64_t> degrees = {5, 0, 1, 40, 3, 0, 17, 2, 9, 100};
  const auto off = offsets_of(degrees);
  auto comm = solo_comm();
  for (bool by_degree : {true, false}) {
    negative_options o;
    o.by_degree = by_degree;
    negative_sampler ns(comm, off, o);
    std::vector<double> weight(degrees.size());
    double total = 0;
    for (std::size_t i = 0; i < degrees.size(); ++i) {
      weight[i] = by_degree ? (degrees[i] > 0 ? std::pow(double(degrees[i]), 0.75) : 0.0) : 1.0;
      total += weight[i];
    }
    for (std::size_t i = 0; i < degrees.size(); ++i)
      EXPECT_NEAR(ns.probability(static_cast<std::int64_t>(i)), weight[i] / total, 1e-9)
          << "node " << i;
    const std::size_t n = 500000;
    std::vector<std::int64_t> out(n);
    ns.sample_host(7, 0, n, out.data(), 2);
    std::vector<double> count(degrees.size(), 0);
    for (std::int64_t v : out) {
      ASSERT_TRUE(v >= 0 && v < static_cast<std::int64_t>(degrees.size())) << v;
      count[v] += 1;
    }
    double x = 0;
    std::size_t k = 0;
    for (std::size_t i = 0; i < degrees.size(); ++i) {
      if (weight[i] == 0) {
        EXPECT_EQ(count[i], 0) << "node " << i << " has no out-edges and was drawn";
        continue;
      }
      const double e = n * weight[i] / total;
      x += (count[i] - e) * (count[i] - e) / e;
      ++k;
    }
    EXPECT_LT(x, chi2_critical_001(k - 1)) << (by_degree ? "degree^0.75" : "uniform");
  }
}

TEST(NegativeSampling, TheSameDrawsForAnyThreadsSplitMemoryTypeAndRanks) {
  std::vector<std::int64_t> degrees(1000);
  for (std::size_t i = 0; i < degrees.size(); ++i)
    degrees[i] = static_cast<std::int64_t>((i * 37) % 23);
  const auto off = offsets_of(degrees);
  const std::size_t n = 200000;
  std::vector<std::int64_t> want(n);
  {
    negative_sampler ns(solo_comm(), off, negative_options{});
    ns.sample_host(99, 0, n, want.data(), 1);
  }
  {
    negative_options o;
    o.type = wm::memory_type::chunked;
    negative_sampler ns(solo_comm(), off, o);
    std::vector<std::int64_t> got(n);
    ns.sample_host(99, 0, 70001, got.data(), 3);
    ns.sample_host(99, 70001, n - 70001, got.data() + 70001, 2);
    EXPECT_EQ(got, want);
  }
  thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    negative_sampler ns(comm, off, negative_options{});
    const std::size_t me = static_cast<std::size_t>(comm->rank());
    const std::size_t b = n * me / 2, e = n * (me + 1) / 2;
    std::vector<std::int64_t> got(e - b);
    ns.sample_host(99, b, e - b, got.data(), 2);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin() + b)) << "rank " << me;
  });
}

TEST(NegativeSampling, AnEdgelessGraphAndADistributedTableAreRefused) {
  auto comm = solo_comm();
  try {
    negative_sampler ns(comm, offsets_of({0, 0, 0}), negative_options{});
    ADD_FAILURE() << "an edgeless graph was accepted";
  } catch (const wm::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("no node has a positive weight"), std::string::npos)
        << e.what();
  }
  negative_options o;
  o.type = wm::memory_type::distributed;
  try {
    negative_sampler ns(comm, offsets_of({1, 2}), o);
    ADD_FAILURE() << "a distributed table was accepted";
  } catch (const wm::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("continuous or chunked"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wholestore_test
