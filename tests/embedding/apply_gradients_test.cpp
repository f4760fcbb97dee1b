// apply_gradients_host: every optimizer and table dtype against a float64 reference on random
// batches with many duplicates; bit-identical results for 1 to 4 ranks (forked processes, each
// given its contiguous slice of the same global batch), 1 and 3 threads, and continuous,
// chunked and distributed memory; duplicates summed (hand-checkable cases, and an order that a
// partial-sum scheme would get wrong); bad arguments on one rank fail every rank and change
// nothing anywhere.
#include "embedding/embedding_test_util.hpp"
#include "embedding/optimizer_reference.hpp"

#include <embedding/table.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>

namespace wholestore_test::embed {
namespace {

constexpr std::size_t test_rows = 97;  // not a multiple of any rank count used
constexpr std::size_t batch_entries = 150;
constexpr int steps = 3;
constexpr float learning_rate = 0.05f;

table_options options_for(optimizer_kind k, dtype t, std::size_t dim, memory_type type,
                          std::uint64_t seed) {
  table_options o;
  o.rows = test_rows;
  o.dim = dim;
  o.dtype = t;
  o.type = type;
  o.location = memory_location::host;
  o.init.method = init_options::uniform;
  o.init.a = -0.5;
  o.init.b = 0.5;
  o.init.seed = seed;
  o.optimizer = optimizer_for(k, seed % 2 == 1);
  return o;
}

/// Gradient dtype of a step: float32, float16, bfloat16 in turn.
dtype grad_type_of(int step) {
  static const dtype types[] = {dtype::float32, dtype::float16, dtype::bfloat16};
  return types[step % 3];
}

/// Calls apply_gradients_host with entries [first, last) of `b`, indices as `it`, gradients
/// as `gt` with a padded row stride.
void apply_slice(table& tb, const batch& b, std::size_t first, std::size_t last, dtype it, dtype gt,
                 float lr, unsigned threads) {
  const std::size_t n = last - first, dim = tb.dim(), stride = dim + 3;
  const auto ib = index_bytes(b.index.data() + first, n, it);
  auto gb = encode_floats(b.grads.data() + first * dim, n, dim, stride, gt);
  tb.apply_gradients_host(wholememory::index_array{n ? ib.data() : nullptr, it, n},
                          wholememory::dense_matrix{n ? gb.data() : nullptr, gt, n, dim, stride},
                          lr, threads);
}

/// The run every test repeats: `steps` calls on this rank's slices of the global batches.
void train(table& tb, std::uint64_t seed, unsigned threads) {
  const int ranks = tb.comm().size(), rank = tb.comm().rank();
  for (int s = 0; s < steps; ++s) {
    batch b = global_batch(seed, s, batch_entries, tb.rows(), tb.dim());
    auto [first, last] = slice(batch_entries, ranks, rank, s);
    apply_slice(tb, b, first, last, s % 2 ? dtype::int32 : dtype::int64, grad_type_of(s),
                learning_rate, threads);
  }
}

/// The same run on one rank, one thread, continuous memory, whole batches.
table baseline(const table_options& o, std::uint64_t seed) {
  table_options solo = o;
  solo.type = memory_type::continuous;
  table base = table::create(solo_comm(), solo);
  for (int s = 0; s < steps; ++s) {
    batch b = global_batch(seed, s, batch_entries, o.rows, o.dim);
    apply_slice(base, b, 0, batch_entries, dtype::int64, grad_type_of(s), learning_rate, 1);
  }
  return base;
}

std::string describe(const table_options& o) {
  return std::string(optimizer_name(o.optimizer.kind)) + " " + wholememory::dtype_name(o.dtype) +
         " dim " + std::to_string(o.dim) + (o.optimizer.weight_decay != 0 ? " decay" : "");
}

/// Units in the last place of `v` in dtype t.
double ulp(dtype t, double v) {
  const int mant = t == dtype::float16 ? 10 : t == dtype::bfloat16 ? 7 : 23;
  const int min_exp = t == dtype::float16 ? -14 : -126;
  const int e = v == 0 ? min_exp : std::max(min_exp, std::ilogb(v));
  return std::ldexp(1.0, e - mant);
}

using identity_param = std::tuple<int, memory_type, unsigned>;
class ApplyIdentity : public ::testing::TestWithParam<identity_param> {};

}  // namespace

TEST(ApplyGradients, EveryOptimizerAndDtypeMatchesTheFloat64Reference) {
  run_ranks(1, [](std::shared_ptr<wholememory::communicator> comm) {
    double worst[3] = {0, 0, 0};  // float32, 16-bit weights, state
    std::uint64_t seed = 100;
    for (optimizer_kind k : all_optimizers()) {
      for (dtype t : table_dtypes()) {
        for (std::size_t dim : {std::size_t{1}, std::size_t{33}, std::size_t{100}}) {
          for (int decay = 0; decay < 2; ++decay, ++seed) {
            table_options o = options_for(k, t, dim, memory_type::continuous, seed);
            o.optimizer = optimizer_for(k, decay == 1);
            table tb = table::create(comm, o);
            const std::size_t we = wholememory::dtype_size(t);
            auto stored_weights = [&] {
              const auto bytes = own_bytes(tb.weights_memory());
              std::vector<double> w(test_rows * dim);
              for (std::size_t e = 0; e < w.size(); ++e)
                w[e] = decode_float(t, bytes.data() + e * we);
              return w;
            };
            reference_table ref(test_rows, dim, t, o.optimizer, stored_weights());
            for (int s = 0; s < 4; ++s) {
              // Each step starts the reference from the table's stored weights, so a 16-bit
              // rounding that went the other way in an earlier step does not compound.
              const std::vector<double> w0 = stored_weights();
              ref.w = w0;
              batch b = global_batch(seed, s, 300, test_rows, dim);
              const dtype gt = grad_type_of(s);
              apply_slice(tb, b, 0, b.index.size(), dtype::int64, gt, learning_rate, 2);
              std::vector<double> g(b.grads.size());
              // The reference sees the gradients as the table received them.
              const auto enc = encode_floats(b.grads.data(), b.index.size(), dim, dim, gt);
              for (std::size_t e = 0; e < g.size(); ++e)
                g[e] = decode_float(gt, enc.data() + e * wholememory::dtype_size(gt));
              ref.apply(b.index, g, learning_rate);
              const std::vector<double> got = stored_weights();
              for (std::size_t e = 0; e < got.size(); ++e) {
                const double v = got[e], want = ref.w[e];
                // float32 arithmetic against double: a few float32 ulps of the value and of
                // the step; a 16-bit table may round the float32 result to the neighbour of
                // the double result's rounding.
                const double big = std::max(std::fabs(v), std::fabs(want));
                const double tol = (t == dtype::float32 ? 0.0 : ulp(t, big)) +
                                   64.0 * ulp(dtype::float32, big + learning_rate);
                double& w = worst[t == dtype::float32 ? 0 : 1];
                w = std::max(w, std::fabs(v - want) / tol);
                ASSERT_LE(std::fabs(v - want), tol)
                    << describe(o) << " step " << s << ": weight " << e / dim << "," << e % dim
                    << " is " << v << ", the reference " << want << " (was " << w0[e] << ")";
              }
            }
            ASSERT_EQ(tb.step(), 4u);
            for (std::size_t i = 0; i < tb.state().size(); ++i) {
              const auto sb = own_bytes(tb.state()[i]);
              const std::vector<double>& want = i == 0 ? ref.s0 : ref.s1;
              const std::vector<double>& scale = i == 0 ? ref.scale0 : ref.scale1;
              ASSERT_EQ(sb.size(), want.size() * 4);
              for (std::size_t e = 0; e < want.size(); ++e) {
                float v;
                std::memcpy(&v, sb.data() + 4 * e, 4);
                // Relative to the gradients' magnitudes: float32 sums of cancelling
                // duplicates carry an error of a few ulps of the sum of their magnitudes.
                const double tol = 1e-5 * std::fabs(want[e]) + 1e-6 * scale[e] + 1e-30;
                worst[2] = std::max(worst[2], std::fabs(v - want[e]) / tol);
                ASSERT_LE(std::fabs(v - want[e]), tol)
                    << describe(o) << ": state " << tb.state_names()[i] << " element " << e
                    << " is " << v << ", the reference " << want[e];
              }
            }
          }
        }
      }
    }
    std::printf("worst error / tolerance: float32 weights %.3f, 16-bit weights %.3f, state %.3f\n",
                worst[0], worst[1], worst[2]);
  });
}

TEST_P(ApplyIdentity, EveryOptimizerDtypeAndDimIsBitIdenticalToOneRank) {
  auto [ranks, type, threads] = GetParam();
  run_ranks(ranks, [type = type,
                    threads = threads](std::shared_ptr<wholememory::communicator> comm) {
    std::uint64_t seed = 500;
    for (optimizer_kind k : all_optimizers()) {
      for (dtype t : table_dtypes()) {
        for (std::size_t dim : {std::size_t{1}, std::size_t{33}, std::size_t{100}}) {
          const table_options o = options_for(k, t, dim, type, ++seed);
          table tb = table::create(comm, o);
          train(tb, seed, threads);
          table base = baseline(o, seed);
          const own_content mine = own_content_of(tb);
          const own_content want = rows_of(base, tb.own_rows());
          ASSERT_EQ(mine.step, static_cast<std::uint64_t>(steps));
          ASSERT_EQ(mine.state.size(), want.state.size());
          ASSERT_EQ(first_difference(mine.weights, want.weights), -1)
              << describe(o) << ": weights differ from the one-rank run, rows "
              << tb.own_rows().begin << ".." << tb.own_rows().end;
          for (std::size_t i = 0; i < want.state.size(); ++i)
            ASSERT_EQ(first_difference(mine.state[i], want.state[i]), -1)
                << describe(o) << ": state " << tb.state_names()[i] << " differs";
          // And the whole table through lookup (collective for distributed memory), once
          // every rank has finished its own rows.
          comm->barrier(nullptr);
          std::vector<std::int64_t> all(test_rows);
          for (std::size_t r = 0; r < test_rows; ++r) all[r] = static_cast<std::int64_t>(r);
          std::vector<float> got(test_rows * dim), expect(test_rows * dim);
          wholememory::index_array ia{all.data(), dtype::int64, test_rows};
          tb.lookup_host(ia,
                         wholememory::dense_matrix{got.data(), dtype::float32, test_rows, dim, dim},
                         threads);
          base.lookup_host(
              ia, wholememory::dense_matrix{expect.data(), dtype::float32, test_rows, dim, dim});
          ASSERT_EQ(std::memcmp(got.data(), expect.data(), got.size() * 4), 0) << describe(o);
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RanksTypesThreads, ApplyIdentity,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(memory_type::continuous,
                                                              memory_type::chunked,
                                                              memory_type::distributed),
                                            ::testing::Values(1u, 3u)),
                         [](const auto& info) {
                           return "ranks" + std::to_string(std::get<0>(info.param)) + "_" +
                                  wholememory::memory_type_name(std::get<1>(info.param)) +
                                  "_threads" + std::to_string(std::get<2>(info.param));
                         });

// The CPU path keeps its exchange lists in the table between calls and only grows them: calls
// that shrink to nothing, grow past every earlier size and shrink again must read only their
// own entries (stale rows of a longer earlier call never reach the update).
TEST(ApplyGradients, CallsOfChangingSizeReuseTheWorkspaceExactly) {
  const std::size_t sizes[] = {150, 11, 0, 400, 3, 260};
  for (int ranks : {1, 2, 3}) {
    run_ranks(ranks, [&](std::shared_ptr<wholememory::communicator> comm) {
      for (memory_type type : {memory_type::continuous, memory_type::distributed}) {
        const table_options o = options_for(optimizer_kind::adam, dtype::float32, 33, type, 77);
        table tb = table::create(comm, o);
        table_options solo = o;
        solo.type = memory_type::continuous;
        table base = table::create(solo_comm(), solo);
        int step = 0;
        for (std::size_t n : sizes) {
          batch b = global_batch(900 + step, step, n, o.rows, o.dim);
          auto [first, last] = slice(n, comm->size(), comm->rank(), step);
          apply_slice(tb, b, first, last, dtype::int64, dtype::float32, learning_rate, 2);
          apply_slice(base, b, 0, n, dtype::int64, dtype::float32, learning_rate, 1);
          ++step;
        }
        const own_content mine = own_content_of(tb);
        const own_content want = rows_of(base, tb.own_rows());
        ASSERT_EQ(first_difference(mine.weights, want.weights), -1)
            << ranks << " ranks, " << wholememory::memory_type_name(type);
        for (std::size_t i = 0; i < want.state.size(); ++i)
          ASSERT_EQ(first_difference(mine.state[i], want.state[i]), -1)
              << ranks << " ranks, state " << tb.state_names()[i];
      }
    });
  }
}

TEST(ApplyGradients, ThreadRanksGiveTheSameBitsAsForkedOnes) {
  // Ranks as threads of one (forked) process over the thread bootstrap.
  fork_result result = fork_ranks(1, [](std::shared_ptr<wholememory::bootstrap>) {
    thread_ranks(3, [](std::shared_ptr<wholememory::bootstrap> bs) {
      auto comm = wholememory::make_host_communicator(bs);
      for (optimizer_kind k : {optimizer_kind::adam, optimizer_kind::rowwise_adagrad}) {
        const table_options o = options_for(k, dtype::float16, 33, memory_type::distributed, 77);
        table tb = table::create(comm, o);
        train(tb, 77, 2);
        table base = baseline(o, 77);
        EXPECT_TRUE(own_content_of(tb) == rows_of(base, tb.own_rows())) << describe(o);
      }
    });
  });
  EXPECT_TRUE(result.all_ok());
}

TEST(ApplyGradients, DuplicatesAreSummedNotAveraged) {
  for (int ranks : {1, 2}) {
    run_ranks(ranks, [](std::shared_ptr<wholememory::communicator> comm) {
      table_options o;
      o.rows = 8;
      o.dim = 3;
      o.type = memory_type::chunked;
      o.init.method = init_options::zeros;
      o.optimizer.kind = optimizer_kind::sgd;
      table tb = table::create(comm, o);
      // Global batch: row 3 twice, row 5 once, every gradient 1; rank 1 holds the second 3.
      std::vector<std::int64_t> idx = comm->size() == 1
                                          ? std::vector<std::int64_t>{3, 5, 3}
                                          : (comm->rank() == 0 ? std::vector<std::int64_t>{3, 5}
                                                               : std::vector<std::int64_t>{3});
      std::vector<float> g(idx.size() * 3, 1.0f);
      tb.apply_gradients_host(wholememory::index_array{idx.data(), dtype::int64, idx.size()},
                              wholememory::dense_matrix{g.data(), dtype::float32, idx.size(), 3, 3},
                              0.5f);
      comm->barrier(nullptr);  // rows of other ranks are final once their calls returned
      std::vector<std::int64_t> all{0, 3, 5, 7};
      std::vector<float> out(12);
      tb.lookup_host(wholememory::index_array{all.data(), dtype::int64, 4},
                     wholememory::dense_matrix{out.data(), dtype::float32, 4, 3, 3});
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(out[0 + c], 0.0f);
        EXPECT_EQ(out[3 + c], -1.0f) << "row 3 had two gradients of 1 at lr 0.5";
        EXPECT_EQ(out[6 + c], -0.5f);
        EXPECT_EQ(out[9 + c], 0.0f);
      }
    });
  }
}

TEST(ApplyGradients, DuplicatesAreSummedLeftToRightInGlobalBatchOrder) {
  // Row 7's gradients in global order: 1e8, 1, -1e8, 1.  Left to right in float32:
  // ((1e8 + 1) - 1e8) + 1 = 1 (1e8 + 1 rounds to 1e8).  Per-rank partial sums, or any order
  // that adds 1 to -1e8 first, give 0.
  for (int ranks : {1, 2, 4}) {
    run_ranks(ranks, [](std::shared_ptr<wholememory::communicator> comm) {
      const int n = comm->size(), rank = comm->rank();
      table_options o;
      o.rows = 10;
      o.dim = 1;
      o.type = memory_type::distributed;
      o.init.method = init_options::zeros;
      table tb = table::create(comm, o);
      const float global[] = {1e8f, 1.0f, -1e8f, 1.0f};
      std::vector<std::int64_t> idx;
      std::vector<float> g;
      for (int i = 0; i < 4; ++i) {
        if (i * n / 4 == rank) {
          idx.push_back(7);
          g.push_back(global[i]);
        }
      }
      tb.apply_gradients_host(wholememory::index_array{idx.data(), dtype::int64, idx.size()},
                              wholememory::dense_matrix{g.data(), dtype::float32, idx.size(), 1, 1},
                              1.0f, 3);
      std::int64_t seven = 7;
      float w = 0;
      tb.lookup_host(wholememory::index_array{&seven, dtype::int64, 1},
                     wholememory::dense_matrix{&w, dtype::float32, 1, 1, 1});
      EXPECT_EQ(w, -1.0f);
    });
  }
}

TEST(ApplyGradients, LongRunsOfDuplicatesAreSummedAsTheDocumentedTree) {
  // Runs of 1 to 40000 duplicates against the spec's tree written independently in the test
  // util; the batch is built so that a plain left-to-right sum gives other bits.
  const std::vector<std::size_t> lengths = long_run_lengths();
  const std::size_t dim = 3, rows = 2 * lengths.size() + 1;
  const batch b = long_run_batch(lengths, dim, 91);
  const long_run_expectation want = expect_long_runs(b, rows, dim);
  ASSERT_TRUE(want.tree_differs_from_plain) << "the batch does not tell the tree from a plain sum";
  for (int ranks : {1, 3}) {
    run_ranks(ranks, [&](std::shared_ptr<wholememory::communicator> comm) {
      table_options o;
      o.rows = rows;
      o.dim = dim;
      o.type = memory_type::distributed;
      o.init.method = init_options::zeros;
      table tb = table::create(comm, o);
      const auto [first, last] = slice(b.index.size(), comm->size(), comm->rank(), 0);
      apply_slice(tb, b, first, last, dtype::int64, dtype::float32, 1.0f, 2);
      std::vector<std::int64_t> all(rows);
      for (std::size_t r = 0; r < rows; ++r) all[r] = static_cast<std::int64_t>(r);
      std::vector<float> got(rows * dim);
      tb.lookup_host(wholememory::index_array{all.data(), dtype::int64, rows},
                     wholememory::dense_matrix{got.data(), dtype::float32, rows, dim, dim});
      for (std::size_t e = 0; e < rows * dim; ++e)
        ASSERT_EQ(std::memcmp(&got[e], &want.weights[e], sizeof(float)), 0)
            << "row " << e / dim << " column " << e % dim << ": " << got[e] << ", want "
            << want.weights[e] << " (" << comm->size() << " ranks)";
    });
  }
}

TEST(ApplyGradients, UntouchedRowsKeepWeightsAndStateAndEmptyCallsCountSteps) {
  run_ranks(2, [](std::shared_ptr<wholememory::communicator> comm) {
    table_options o = options_for(optimizer_kind::adam, dtype::float32, 4, memory_type::chunked, 1);
    table tb = table::create(comm, o);
    const own_content before = own_content_of(tb);
    // Every rank passes nothing: a step with no rows (null pointers allowed).
    tb.apply_gradients_host(wholememory::index_array{nullptr, dtype::int32, 0},
                            wholememory::dense_matrix{nullptr, dtype::float32, 0, 4, 4}, 0.1f);
    own_content after = own_content_of(tb);
    EXPECT_EQ(after.step, 1u);
    after.step = 0;
    EXPECT_TRUE(after == before);
    // Rank 0 touches row 0 only: row 0 changes, no other row or state does.
    std::vector<std::int64_t> idx{0};
    std::vector<float> g{1, 2, 3, 4};
    const std::size_t n = comm->rank() == 0 ? 1 : 0;
    tb.apply_gradients_host(wholememory::index_array{idx.data(), dtype::int64, n},
                            wholememory::dense_matrix{g.data(), dtype::float32, n, 4, 4}, 0.1f);
    const own_content now = own_content_of(tb);
    const std::size_t skip_w = comm->rank() == 0 ? 16 : 0, skip_s = comm->rank() == 0 ? 16 : 0;
    if (comm->rank() == 0) {
      EXPECT_NE(now.weights, before.weights);
    }
    for (std::size_t b = skip_w; b < now.weights.size(); ++b)
      ASSERT_EQ(now.weights[b], before.weights[b]) << "an untouched weight changed";
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t b = skip_s; b < now.state[i].size(); ++b)
        ASSERT_EQ(now.state[i][b], before.state[i][b]) << "an untouched state changed";
  });
}

TEST(ApplyGradients, AnOutOfRangeIndexOnOneRankChangesNothingOnAnyRank) {
  for (memory_type type :
       {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
    run_ranks(3, [type](std::shared_ptr<wholememory::communicator> comm) {
      const int rank = comm->rank();
      table_options o = options_for(optimizer_kind::adagrad, dtype::float16, 5, type, 3);
      table tb = table::create(comm, o);
      train(tb, 3, 2);
      const own_content before = own_content_of(tb);
      struct bad_case {
        std::int64_t value;
        dtype index_type;
      };
      for (bad_case bc : {bad_case{static_cast<std::int64_t>(test_rows) + 3, dtype::int64},
                          bad_case{-1, dtype::int32}, bad_case{test_rows, dtype::int32}}) {
        batch b = global_batch(9, 0, 12, test_rows, 5);
        if (rank == 1) b.index[5] = bc.value;
        try {
          apply_slice(tb, b, 0, 12, bc.index_type, dtype::float32, 0.1f, 2);
          ADD_FAILURE() << "rank " << rank << ": no error for index " << bc.value;
        } catch (const wholememory::logic_error& e) {
          const std::string what = e.what();
          const std::string needle =
              rank == 1 ? "index " + std::to_string(bc.value) +
                              " at position 5 is outside the table of 97"
                        : "rank 1 passed index " + std::to_string(bc.value) + " at position 5";
          EXPECT_NE(what.find(needle), std::string::npos) << what;
        }
        EXPECT_TRUE(own_content_of(tb) == before) << "rank " << rank << " changed";
      }
      // The ranks still agree: a good call works afterwards and counts as the next step.
      batch b = global_batch(9, 1, 12, test_rows, 5);
      apply_slice(tb, b, 0, 12, dtype::int64, dtype::float32, 0.1f, 2);
      EXPECT_EQ(tb.step(), before.step + 1);
    });
  }
}

TEST(ApplyGradients, BadGradientsOnOneRankFailEveryRank) {
  run_ranks(2, [](std::shared_ptr<wholememory::communicator> comm) {
    const int rank = comm->rank();
    table tb = table::create(
        comm, options_for(optimizer_kind::rmsprop, dtype::float32, 4, memory_type::distributed, 5));
    const own_content before = own_content_of(tb);
    std::vector<std::int64_t> idx{1, 2, 3};
    std::vector<float> g(3 * 8, 0.5f);
    std::vector<double> g64(3 * 4, 0.5);
    struct bad_case {
      const char* message;
      wholememory::index_array indices;
      wholememory::dense_matrix grads;
    };
    const wholememory::index_array good_idx{idx.data(), dtype::int64, 3};
    const wholememory::dense_matrix good_g{g.data(), dtype::float32, 3, 4, 4};
    for (const bad_case& bc : {
             bad_case{"2 gradient rows for 3 indices", good_idx,
                      wholememory::dense_matrix{g.data(), dtype::float32, 2, 4, 4}},
             bad_case{"gradients have 5 columns, the table 4", good_idx,
                      wholememory::dense_matrix{g.data(), dtype::float32, 3, 5, 5}},
             bad_case{"gradients must be float32, float16 or bfloat16, not int32", good_idx,
                      wholememory::dense_matrix{g.data(), dtype::int32, 3, 4, 4}},
             bad_case{"not float64", good_idx,
                      wholememory::dense_matrix{g64.data(), dtype::float64, 3, 4, 4}},
             bad_case{"indices must be int32 or int64, not float32",
                      wholememory::index_array{g.data(), dtype::float32, 3}, good_g},
             bad_case{"row stride 3 is less than its 4 columns", good_idx,
                      wholememory::dense_matrix{g.data(), dtype::float32, 3, 4, 3}},
         }) {
      try {
        if (rank == 0) {
          tb.apply_gradients_host(bc.indices, bc.grads, 0.1f);
        } else {
          tb.apply_gradients_host(good_idx, good_g, 0.1f);
        }
        ADD_FAILURE() << "rank " << rank << ": no error for '" << bc.message << "'";
      } catch (const wholememory::logic_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(rank == 0 ? bc.message : "rank 0 passed invalid arguments"),
                  std::string::npos)
            << what;
      }
      EXPECT_TRUE(own_content_of(tb) == before);
    }
    // A learning rate that differs between ranks is a mismatch.
    EXPECT_THROW(tb.apply_gradients_host(good_idx, good_g, rank == 0 ? 0.1f : 0.2f),
                 wholememory::mismatch_error);
    EXPECT_TRUE(own_content_of(tb) == before);
#if !defined(WHOLESTORE_HAS_CUDA)
    EXPECT_THROW(tb.apply_gradients(good_idx, good_g, 0.1f, nullptr), wholememory::logic_error);
#endif
  });
}

}  // namespace wholestore_test::embed
