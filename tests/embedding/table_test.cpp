// Embedding tables on the CPU: creation and its argument agreement, initialisation (a pure
// function of seed, row and column: the same for 1 to 4 ranks, every memory type and dtype;
// its statistics), lookup against a direct read, scatter_rows, the checkpoint seam, and bad
// arguments.  Tables live in forked ranks over the host communicator.
#include "embedding/embedding_test_util.hpp"

#include <embedding/table.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <tuple>

namespace wholestore_test::embed {
namespace {

table_options small_options(memory_type type, dtype t, std::size_t rows, std::size_t dim) {
  table_options o;
  o.rows = rows;
  o.dim = dim;
  o.dtype = t;
  o.type = type;
  o.location = memory_location::host;
  return o;
}

/// The stored bits of element (r, c) of a fresh table.
template <typename T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

bool element_is_initial(const table& t, const void* stored, std::size_t r, std::size_t c) {
  const double want = init_value(t.options().init, r, c);
  switch (t.dtype()) {
    case dtype::float16:
      return same_bits(*static_cast<const wholememory::half_t*>(stored),
                       wholememory::convert_element<wholememory::half_t>(want));
    case dtype::bfloat16:
      return same_bits(*static_cast<const wholememory::bfloat16_t*>(stored),
                       wholememory::convert_element<wholememory::bfloat16_t>(want));
    default:
      return same_bits(*static_cast<const float*>(stored), static_cast<float>(want));
  }
}

std::string type_name(memory_type t) { return wholememory::memory_type_name(t); }

using init_param = std::tuple<int, memory_type>;
class TableInit : public ::testing::TestWithParam<init_param> {};

}  // namespace

TEST(EmbeddingNames, ParseAndPrintRoundTrip) {
  for (optimizer_kind k : all_optimizers()) EXPECT_EQ(parse_optimizer(optimizer_name(k)), k);
  for (auto k : {init_options::zeros, init_options::uniform, init_options::normal})
    EXPECT_EQ(parse_init_kind(init_kind_name(k)), k);
  try {
    parse_optimizer("adamw");
    FAIL() << "no error for an unknown optimizer";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("'adamw'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rowwise_adagrad"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_init_kind("xavier"), wholememory::logic_error);
}

TEST(EmbeddingInit, ValueIsAPureFunctionOfSeedRowAndColumn) {
  init_options u;
  u.method = init_options::uniform;
  u.seed = 7;
  EXPECT_EQ(init_value(u, 5, 3), init_value(u, 5, 3));
  EXPECT_NE(init_value(u, 5, 3), init_value(u, 3, 5));
  EXPECT_NE(init_value(u, 5, 3), init_value(u, 5, 4));
  init_options other = u;
  other.seed = 8;
  EXPECT_NE(init_value(u, 5, 3), init_value(other, 5, 3));
  init_options z;
  z.method = init_options::zeros;
  EXPECT_EQ(init_value(z, 12, 1), 0.0);
}

TEST(EmbeddingInit, UniformAndNormalStatistics) {
  init_options u;
  u.method = init_options::uniform;
  u.a = -0.5;
  u.b = 1.5;
  u.seed = 11;
  const std::size_t rows = 2000, cols = 100;
  double sum = 0, sq = 0, lo = 1e9, hi = -1e9;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double v = init_value(u, r, c);
      ASSERT_GE(v, u.a);
      ASSERT_LT(v, u.b);
      sum += v;
      sq += v * v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  const double n = static_cast<double>(rows * cols);
  const double mean = sum / n, var = sq / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(var, 4.0 / 12.0, 0.01 * 4.0 / 12.0);
  EXPECT_LT(lo, -0.499);
  EXPECT_GT(hi, 1.499);

  init_options g;
  g.method = init_options::normal;
  g.mean = 1.0;
  g.std = 2.0;
  g.seed = 12;
  sum = sq = 0;
  std::size_t beyond3 = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double v = init_value(g, r, c);
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sq += v * v;
      if (std::fabs(v - 1.0) > 6.0) ++beyond3;
    }
  const double gmean = sum / n, gstd = std::sqrt(sq / n - gmean * gmean);
  EXPECT_NEAR(gmean, 1.0, 0.02);
  EXPECT_NEAR(gstd, 2.0, 0.02);
  // P(|z| > 3) = 0.27%.
  EXPECT_NEAR(static_cast<double>(beyond3) / n, 0.0027, 0.0006);
}

TEST_P(TableInit, EveryRankHoldsTheSameFunctionOfSeedRowAndColumn) {
  auto [ranks, type] = GetParam();
  run_ranks(ranks, [type = type](std::shared_ptr<wholememory::communicator> comm) {
    for (dtype t : table_dtypes()) {
      for (auto method : {init_options::uniform, init_options::normal, init_options::zeros}) {
        for (std::size_t dim : {std::size_t{1}, std::size_t{33}, std::size_t{100}}) {
          table_options o = small_options(type, t, 97, dim);
          o.init.method = method;
          o.init.seed = 40 + dim;
          o.init.a = -0.2;
          o.init.b = 0.7;
          o.init.std = 0.3;
          o.optimizer.kind = optimizer_kind::adagrad;
          o.optimizer.initial_accumulator = 0.25f;
          table tb = table::create(comm, o);
          ASSERT_EQ(tb.rows(), 97u);
          ASSERT_EQ(tb.dim(), dim);
          ASSERT_EQ(tb.step(), 0u);
          // The rank ranges cover the table in rank order; this rank's part is its range.
          const auto& ranges = tb.rank_rows();
          ASSERT_EQ(ranges.size(), static_cast<std::size_t>(comm->size()));
          EXPECT_EQ(ranges.front().begin, 0u);
          EXPECT_EQ(ranges.back().end, 97u);
          for (std::size_t p = 1; p < ranges.size(); ++p)
            EXPECT_EQ(ranges[p].begin, ranges[p - 1].end);
          const row_range own = tb.own_rows();
          const auto bytes = own_bytes(tb.weights_memory());
          const std::size_t e = wholememory::dtype_size(t);
          ASSERT_EQ(bytes.size(), own.size() * dim * e);
          for (std::size_t r = own.begin; r < own.end; ++r)
            for (std::size_t c = 0; c < dim; ++c)
              ASSERT_TRUE(
                  element_is_initial(tb, bytes.data() + ((r - own.begin) * dim + c) * e, r, c))
                  << init_kind_name(method) << " " << wholememory::dtype_name(t) << " row " << r
                  << " col " << c;
          // The accumulator starts at initial_accumulator.
          ASSERT_EQ(tb.state().size(), 1u);
          const auto state = own_bytes(tb.state()[0]);
          ASSERT_EQ(state.size(), own.size() * dim * 4);
          for (std::size_t k = 0; k < state.size() / 4; ++k) {
            float s;
            std::memcpy(&s, state.data() + 4 * k, 4);
            ASSERT_EQ(s, 0.25f);
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RanksAndTypes, TableInit,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(memory_type::continuous,
                                                              memory_type::chunked,
                                                              memory_type::distributed)),
                         [](const auto& info) {
                           return "ranks" + std::to_string(std::get<0>(info.param)) + "_" +
                                  type_name(std::get<1>(info.param));
                         });

TEST(EmbeddingTable, StoredValuesStayInsideTheInitBounds) {
  run_ranks(1, [](std::shared_ptr<wholememory::communicator> comm) {
    for (dtype t : table_dtypes()) {
      table_options o = small_options(memory_type::continuous, t, 500, 40);
      o.init.a = 0.25;
      o.init.b = 0.75;
      o.init.seed = 3;
      table tb = table::create(comm, o);
      const auto bytes = own_bytes(tb.weights_memory());
      const std::size_t e = wholememory::dtype_size(t);
      std::set<double> distinct;
      for (std::size_t k = 0; k < 500 * 40; ++k) {
        const double v = decode_float(t, bytes.data() + k * e);
        ASSERT_GE(v, 0.25);
        ASSERT_LE(v, 0.75);  // rounding may reach the upper bound
        distinct.insert(v);
      }
      EXPECT_GT(distinct.size(), t == dtype::float32 ? 19000u : 50u);
    }
  });
}

TEST(EmbeddingTable, LookupMatchesADirectReadOnEveryTypeAndRankCount) {
  for (int ranks : {1, 2, 3}) {
    for (memory_type type :
         {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
      run_ranks(ranks, [type](std::shared_ptr<wholememory::communicator> comm) {
        for (dtype t : table_dtypes()) {
          for (std::size_t dim : {std::size_t{1}, std::size_t{33}}) {
            table_options o = small_options(type, t, 61, dim);
            o.init.method = init_options::normal;
            o.init.seed = 9;
            table tb = table::create(comm, o);
            const int rank = comm->rank();
            std::vector<std::int64_t> idx;
            for (std::size_t i = 0; i < 40 + 3 * static_cast<std::size_t>(rank); ++i)
              idx.push_back(static_cast<std::int64_t>(hash3(5, rank, i) % 61));
            idx.push_back(0);
            idx.push_back(60);
            idx.push_back(idx[1]);
            for (dtype it : {dtype::int32, dtype::int64}) {
              for (dtype out_t : {dtype::float32, t}) {
                const auto ib = index_bytes(idx.data(), idx.size(), it);
                const std::size_t oe = wholememory::dtype_size(out_t), stride = dim + 1;
                std::vector<unsigned char> out(idx.size() * stride * oe, 0x5A);
                tb.lookup_host(
                    wholememory::index_array{ib.data(), it, idx.size()},
                    wholememory::dense_matrix{out.data(), out_t, idx.size(), dim, stride}, 2);
                for (std::size_t i = 0; i < idx.size(); ++i) {
                  for (std::size_t c = 0; c < stride; ++c) {
                    const unsigned char* got = out.data() + (i * stride + c) * oe;
                    if (c == dim) {
                      for (std::size_t b = 0; b < oe; ++b) ASSERT_EQ(got[b], 0x5A);
                      continue;
                    }
                    // The direct read: the view's address for shared memory, else the
                    // value the row was initialised with.
                    double want;
                    if (type != memory_type::distributed) {
                      table_view v = tb.view();
                      const std::size_t e = wholememory::dtype_size(t);
                      const char* row =
                          t == dtype::float32
                              ? reinterpret_cast<const char*>(v.row<float>(idx[i]))
                              : reinterpret_cast<const char*>(v.row<wholememory::half_t>(idx[i]));
                      want = decode_float(t, row + c * e);
                    } else {
                      want = round_to(t, init_value(o.init, idx[i], c));
                    }
                    ASSERT_EQ(decode_float(out_t, got), want)
                        << "entry " << i << " row " << idx[i] << " col " << c;
                  }
                }
              }
            }
          }
        }
      });
    }
  }
}

TEST(EmbeddingTable, LookupOfAnOutOfRangeIndexNamesItAndWritesNothing) {
  run_ranks(1, [](std::shared_ptr<wholememory::communicator> comm) {
    table tb = table::create(comm, small_options(memory_type::chunked, dtype::float32, 10, 4));
    std::vector<std::int64_t> idx{1, 2, 10, 3};
    std::vector<float> out(16, -7.0f);
    try {
      tb.lookup_host(wholememory::index_array{idx.data(), dtype::int64, 4},
                     wholememory::dense_matrix{out.data(), dtype::float32, 4, 4, 4});
      ADD_FAILURE() << "no error for index 10";
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("index 10 at position 2"), std::string::npos)
          << e.what();
    }
    for (float v : out) ASSERT_EQ(v, -7.0f);
  });
}

TEST(EmbeddingTable, ScatterRowsWritesRawRowsThatLookupReadsBack) {
  for (memory_type type : {memory_type::continuous, memory_type::distributed}) {
    run_ranks(2, [type](std::shared_ptr<wholememory::communicator> comm) {
      table_options o = small_options(type, dtype::bfloat16, 30, 5);
      o.optimizer.kind = optimizer_kind::adam;
      table tb = table::create(comm, o);
      const int rank = comm->rank();
      // Rank r writes rows r, r + 2, ... with values row + c / 8 (exact in bfloat16).
      std::vector<std::int64_t> idx;
      std::vector<float> rows;
      for (std::int64_t r = rank; r < 30; r += 2) {
        idx.push_back(r);
        for (int c = 0; c < 5; ++c) rows.push_back(static_cast<float>(r) + c / 8.0f);
      }
      tb.scatter_rows_host(
          wholememory::index_array{idx.data(), dtype::int64, idx.size()},
          wholememory::dense_matrix{rows.data(), dtype::float32, idx.size(), 5, 5});
      comm->barrier(nullptr);
      std::vector<std::int64_t> all(30);
      for (int r = 0; r < 30; ++r) all[r] = 29 - r;
      std::vector<float> out(30 * 5);
      tb.lookup_host(wholememory::index_array{all.data(), dtype::int64, 30},
                     wholememory::dense_matrix{out.data(), dtype::float32, 30, 5, 5});
      for (int i = 0; i < 30; ++i)
        for (int c = 0; c < 5; ++c)
          ASSERT_EQ(out[i * 5 + c], static_cast<float>(29 - i) + c / 8.0f) << i << " " << c;
      EXPECT_EQ(tb.step(), 0u);  // raw writes are no optimizer step
      for (const auto& s : tb.state())
        for (unsigned char b : own_bytes(s)) ASSERT_EQ(b, 0);
    });
  }
}

TEST(EmbeddingTable, CheckpointArraysNameWeightsAndStateWithTheirShapes) {
  run_ranks(2, [](std::shared_ptr<wholememory::communicator> comm) {
    struct expect {
      optimizer_kind kind;
      std::vector<std::string> names;
      std::size_t cols;
    };
    for (const expect& x :
         {expect{optimizer_kind::sgd, {}, 0}, expect{optimizer_kind::adam, {"m", "v"}, 7},
          expect{optimizer_kind::adagrad, {"sum"}, 7},
          expect{optimizer_kind::rowwise_adagrad, {"sum"}, 1},
          expect{optimizer_kind::rmsprop, {"square_avg"}, 7}}) {
      table_options o = small_options(memory_type::chunked, dtype::float16, 13, 7);
      o.optimizer.kind = x.kind;
      table tb = table::create(comm, o);
      EXPECT_EQ(tb.state_names(), x.names);
      auto arrays = tb.checkpoint_arrays();
      ASSERT_EQ(arrays.size(), 1 + x.names.size());
      EXPECT_EQ(arrays[0].name, "weights");
      EXPECT_EQ(arrays[0].memory, &tb.weights_memory());
      EXPECT_EQ(arrays[0].type, dtype::float16);
      EXPECT_EQ(arrays[0].cols, 7u);
      for (std::size_t i = 0; i < x.names.size(); ++i) {
        EXPECT_EQ(arrays[1 + i].name, x.names[i]);
        EXPECT_EQ(arrays[1 + i].memory, &tb.state()[i]);
        EXPECT_EQ(arrays[1 + i].type, dtype::float32);
        EXPECT_EQ(arrays[1 + i].cols, x.cols);
        EXPECT_EQ(arrays[1 + i].memory->size(), 13 * x.cols * 4);
        // Same row split as the weights.
        const auto& wp = tb.weights_memory().get_partition();
        const auto& sp = arrays[1 + i].memory->get_partition();
        for (int p = 0; p < 2; ++p)
          EXPECT_EQ(sp.part_offset(p) / (x.cols * 4), wp.part_offset(p) / (7 * 2));
      }
      tb.set_step(41);
      EXPECT_EQ(tb.step(), 41u);
    }
  });
}

TEST(EmbeddingTable, MismatchedCreateArgumentsFailOnEveryRank) {
  fork_result result = fork_ranks(
      3,
      [](std::shared_ptr<wholememory::bootstrap> bs) {
        auto comm = wholememory::make_host_communicator(bs);
        const int rank = comm->rank();
        struct variant {
          const char* field;
          std::function<void(table_options&)> change;
        };
        for (const variant& v :
             {variant{"dim", [](table_options& o) { o.dim = 9; }},
              variant{"optimizer.kind",
                      [](table_options& o) { o.optimizer.kind = optimizer_kind::adam; }},
              variant{"init.seed", [](table_options& o) { o.init.seed = 5; }},
              variant{"dtype", [](table_options& o) { o.dtype = dtype::float16; }}}) {
          table_options o = small_options(memory_type::chunked, dtype::float32, 20, 8);
          if (rank == 2) v.change(o);
          try {
            table tb = table::create(comm, o);
            ADD_FAILURE() << "rank " << rank << ": no error for a different " << v.field;
          } catch (const wholememory::mismatch_error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(std::string("rank 2 passed ") + v.field + " = "), std::string::npos)
                << what;
          }
        }
        // The communicator is still usable: a matching create works.
        table tb = table::create(comm, small_options(memory_type::chunked, dtype::float32, 20, 8));
        EXPECT_EQ(tb.rows(), 20u);
      },
      std::chrono::seconds(20));
  for (int r = 0; r < 3; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
}

TEST(EmbeddingTable, InvalidOptionsAreRejected) {
  run_ranks(1, [](std::shared_ptr<wholememory::communicator> comm) {
    auto expect_error = [&](const table_options& o, const std::string& needle) {
      try {
        table::create(comm, o);
        ADD_FAILURE() << "no error; expected one naming '" << needle << "'";
      } catch (const wholememory::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
    };
    table_options o = small_options(memory_type::continuous, dtype::float32, 10, 4);
    table_options bad = o;
    bad.dim = 0;
    expect_error(bad, "dim must be at least 1");
    bad = o;
    bad.dtype = dtype::int32;
    expect_error(bad, "not int32");
    bad = o;
    bad.dtype = dtype::float64;
    expect_error(bad, "not float64");
    bad = o;
    bad.init.a = 1.0;
    bad.init.b = 0.5;
    expect_error(bad, "a <= b");
    bad = o;
    bad.init.method = init_options::normal;
    bad.init.std = -1;
    expect_error(bad, "std >= 0");
    bad = o;
    bad.optimizer.beta1 = 1.0f;
    expect_error(bad, "beta1");
    bad = o;
    bad.optimizer.initial_accumulator = -1.0f;
    expect_error(bad, "initial_accumulator");
    EXPECT_THROW(table::create(nullptr, o), wholememory::logic_error);
    table empty;
    EXPECT_FALSE(empty);
    EXPECT_THROW(empty.rows(), wholememory::logic_error);
  });
}

TEST(EmbeddingTable, ZeroRowTableAndMoreRanksThanRows) {
  run_ranks(3, [](std::shared_ptr<wholememory::communicator> comm) {
    table tb = table::create(comm, small_options(memory_type::distributed, dtype::float32, 2, 3));
    std::size_t owned = 0;
    for (const row_range& r : tb.rank_rows()) owned += r.size();
    EXPECT_EQ(owned, 2u);
    table moved = std::move(tb);
    EXPECT_FALSE(tb);
    EXPECT_EQ(moved.rows(), 2u);
    table none = table::create(comm, small_options(memory_type::chunked, dtype::float16, 0, 3));
    EXPECT_EQ(none.rows(), 0u);
    EXPECT_EQ(none.own_rows().size(), 0u);
    // Empty steps work on a zero-row table; any index is out of range.
    none.apply_gradients_host(wholememory::index_array{nullptr, dtype::int64, 0},
                              wholememory::dense_matrix{nullptr, dtype::float32, 0, 3, 3}, 0.1f);
    EXPECT_EQ(none.step(), 1u);
    std::int64_t zero = 0;
    float g[3] = {1, 1, 1};
    const std::size_t n = comm->rank() == 2 ? 1 : 0;
    try {
      none.apply_gradients_host(wholememory::index_array{&zero, dtype::int64, n},
                                wholememory::dense_matrix{g, dtype::float32, n, 3, 3}, 0.1f);
      ADD_FAILURE() << "no error for index 0 of a zero-row table";
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("outside the table of 0 rows"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(none.step(), 1u);
  });
}

}  // namespace wholestore_test::embed
