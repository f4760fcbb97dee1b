// Partition arithmetic and PtrGen lookup on host views, against plain references.
#include <wholememory/allocation.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

using wholememory::chunked_view;
using wholememory::partition;
using wholememory::PtrGen;

namespace {

void expect_valid(const partition& p, std::size_t total, int parts, std::size_t granularity) {
  ASSERT_EQ(p.num_parts(), parts);
  EXPECT_EQ(p.total_bytes, total);
  EXPECT_EQ(p.offsets.front(), 0u);
  EXPECT_EQ(p.offsets.back(), total);
  for (int i = 0; i < parts; ++i) {
    EXPECT_LE(p.offsets[i], p.offsets[i + 1]);
    if (i > 0) {
      EXPECT_EQ(p.offsets[i] % granularity, 0u) << "part " << i << " starts mid-row";
    }
  }
}

}  // namespace

TEST(Partition, EvenSplitIsBalancedAndAligned) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    int parts = 1 + static_cast<int>(rng() % 9);
    std::size_t granularity = 1 + rng() % 300;
    std::size_t total = rng() % 100000;
    partition p = partition::even(total, parts, granularity);
    expect_valid(p, total, parts, granularity);
    std::size_t granules = total / granularity;
    for (int i = 0; i < parts; ++i) {
      std::size_t bytes = p.part_bytes(i) - (i == parts - 1 ? total % granularity : 0);
      ASSERT_EQ(bytes % granularity, 0u);
      std::size_t g = bytes / granularity;
      EXPECT_TRUE(g == granules / parts || g == granules / parts + 1)
          << "part " << i << " has " << g << " granules of " << granules << " over " << parts;
    }
  }
}

TEST(Partition, EdgeCases) {
  partition zero = partition::even(0, 4, 16);
  expect_valid(zero, 0, 4, 16);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(zero.part_bytes(i), 0u);

  // Fewer granules than parts: the first parts get one each, the rest are empty.
  partition few = partition::even(3 * 100 + 7, 5, 100);
  expect_valid(few, 307, 5, 100);
  EXPECT_EQ(few.part_bytes(0), 100u);
  EXPECT_EQ(few.part_bytes(2), 100u);
  EXPECT_EQ(few.part_bytes(3), 0u);
  EXPECT_EQ(few.part_bytes(4), 7u);  // the tail shorter than a granule goes to the last part

  // Over 4 GiB: 64-bit offsets.
  std::size_t big = (std::size_t{5} << 32) + 12;
  partition p = partition::even(big, 3, 4);
  expect_valid(p, big, 3, 4);
  EXPECT_GT(p.part_offset(2), std::size_t{1} << 32);

  EXPECT_THROW(partition::even(10, 0, 1), wholememory::logic_error);
  EXPECT_THROW(partition::even(10, 2, 0), wholememory::logic_error);
}

TEST(Partition, FromSizes) {
  partition p = partition::from_sizes({0, 64, 0, 32, 5}, 16);
  expect_valid(p, 101, 5, 1);
  EXPECT_EQ(p.part_of(0), 1);
  EXPECT_EQ(p.part_of(63), 1);
  EXPECT_EQ(p.part_of(64), 3);
  EXPECT_EQ(p.part_of(96), 4);
  EXPECT_EQ(p.part_of(100), 4);
  EXPECT_THROW(p.part_of(101), wholememory::logic_error);
  EXPECT_THROW(partition::from_sizes({10, 16}, 16), wholememory::logic_error);
  EXPECT_THROW(partition::from_sizes({}, 16), wholememory::logic_error);
}

TEST(Partition, PartOfMatchesLinearScan) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    int parts = 1 + static_cast<int>(rng() % 8);
    std::vector<std::size_t> sizes(parts);
    for (auto& s : sizes) s = (rng() % 3 == 0) ? 0 : 4 * (rng() % 50);
    partition p = partition::from_sizes(sizes, 4);
    for (std::size_t off = 0; off < p.total_bytes; ++off) {
      int expect = -1;
      for (int i = 0; i < parts; ++i)
        if (off >= p.offsets[i] && off < p.offsets[i + 1]) expect = i;
      ASSERT_EQ(p.part_of(off), expect) << "offset " << off;
    }
  }
}

// A chunked view over separate host buffers finds every element where a plain reference puts
// it, for uniform parts (division) and uneven parts with empty ones (binary search).
TEST(PtrGen, ChunkedViewMatchesReference) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 100; ++trial) {
    int parts = 1 + static_cast<int>(rng() % 8);
    bool uniform = trial % 2 == 0;
    std::vector<std::size_t> elems(parts);
    std::size_t common = 1 + rng() % 40;
    for (int i = 0; i < parts; ++i)
      elems[i] = uniform ? (i + 1 == parts ? rng() % 60 : common) : rng() % 3 ? rng() % 40 : 0;
    std::vector<std::vector<double>> buffers(parts);
    chunked_view view{};
    view.num_parts = parts;
    std::size_t offset = 0;
    for (int i = 0; i < parts; ++i) {
      buffers[i].resize(elems[i]);
      view.parts[i] = buffers[i].data();
      view.offsets[i] = offset * sizeof(double);
      offset += elems[i];
    }
    view.offsets[parts] = offset * sizeof(double);
    view.uniform_part_bytes = uniform && parts > 1 ? common * sizeof(double) : 0;

    PtrGen<const chunked_view, double> gen(&view);
    for (std::size_t i = 0; i < offset; ++i) *gen.At(i) = static_cast<double>(i) * 1.5;
    std::size_t k = 0;
    for (int p = 0; p < parts; ++p)
      for (std::size_t e = 0; e < elems[p]; ++e, ++k)
        ASSERT_EQ(buffers[p][e], static_cast<double>(k) * 1.5) << "part " << p << " elem " << e;

    std::vector<double> flat(offset);
    PtrGen<double, double> plain(flat.data());
    for (std::size_t i = 0; i < offset; ++i) EXPECT_EQ(plain.At(i), flat.data() + i);
  }
}
