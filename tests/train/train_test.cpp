// The node-embedding trainer (train/trainer.hpp) on small graphs, ranks as threads: the same
// embeddings bit for bit for 1, 2 and 3 ranks and any thread count, in every mode; a graph in
// distributed memory gives the continuous graph's bits (ranks without slots in a batch
// included, node2vec too); a run resumed from its checkpoint ends with the same bits as one
// that never stopped; a node without edges keeps its initial vector; bad settings fail naming
// the problem; the link-prediction scores against hand-computed cases.
#include "common/multiprocess.hpp"
#include "common/temp_dir.hpp"
#include "train_ranks.hpp"

#include <embedding/table.hpp>
#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <graph/random.hpp>
#include <train/trainer.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace wholestore::train;
namespace fs = std::filesystem;
namespace wg = wholestore::graph;

const wg::edge_split& small_split() { return wholestore_test::small_train_split(); }

train_settings small_settings(train_mode mode) {
  train_settings s;
  s.mode = mode;
  s.walk_length = 6;
  s.window = 2;
  s.walks_per_node = 1;
  s.p = 0.5;
  s.q = 2.0;
  s.negatives = 3;
  s.dim = 19;  // not a multiple of 32 lanes nor of 16 bytes
  s.batch_size = 333;
  s.epochs = 2;
  s.seed = 11;
  s.hits_k = 10;
  s.threads = 2;
  return s;
}

train_result run_ranks(int ranks, const train_settings& s,
                       const wg::edge_split& split = small_split()) {
  return wholestore_test::train_on_ranks(ranks, s, split);
}

using wholestore_test::same_bits;

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() /
                     ("wholestore-train-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  return p.string();
}

class TrainModes : public ::testing::TestWithParam<train_mode> {};

TEST_P(TrainModes, SameEmbeddingsForOneTwoAndThreeRanks) {
  const train_settings s = small_settings(GetParam());
  const train_result one = run_ranks(1, s);
  ASSERT_EQ(one.embeddings.size(), small_split().train.num_nodes * s.dim);
  ASSERT_EQ(one.epochs.size(), 2u);
  EXPECT_GT(one.pairs, 0u);
  for (int ranks : {2, 3}) {
    const train_result r = run_ranks(ranks, s);
    EXPECT_TRUE(same_bits(one.embeddings, r.embeddings)) << ranks << " ranks";
    ASSERT_EQ(r.epochs.size(), one.epochs.size());
    for (std::size_t e = 0; e < r.epochs.size(); ++e) {
      // The loss is summed exactly: the same figure, not merely close.
      EXPECT_EQ(r.epochs[e].loss, one.epochs[e].loss) << ranks << " ranks, epoch " << e + 1;
      EXPECT_EQ(r.epochs[e].pairs, one.epochs[e].pairs);
    }
    EXPECT_EQ(r.final_scores.auc, one.final_scores.auc) << ranks << " ranks";
  }
  train_settings one_thread = s;
  one_thread.threads = 1;
  EXPECT_TRUE(same_bits(one.embeddings, run_ranks(1, one_thread).embeddings)) << "1 thread";
}

TEST_P(TrainModes, ResumedRunEqualsUninterrupted) {
  const train_settings s = small_settings(GetParam());
  const train_result whole = run_ranks(1, s);
  const std::string dir = temp_dir("resume");
  train_settings first = s;
  first.checkpoint_dir = dir;
  first.stop_after_epochs = 1;
  const train_result part = run_ranks(2, first);  // stopped after epoch 1, on two ranks
  EXPECT_EQ(part.last_epoch, 1);
  EXPECT_FALSE(same_bits(whole.embeddings, part.embeddings));
  train_settings rest = s;
  rest.resume_dir = dir;
  const train_result resumed = run_ranks(1, rest);
  EXPECT_EQ(resumed.first_epoch, 1);
  EXPECT_TRUE(same_bits(whole.embeddings, resumed.embeddings));
  ASSERT_EQ(resumed.epochs.size(), 2u);  // the curve carries the stored epoch
  EXPECT_EQ(resumed.epochs[0].loss, whole.epochs[0].loss);
  EXPECT_EQ(resumed.epochs[1].loss, whole.epochs[1].loss);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Modes, TrainModes,
                         ::testing::Values(train_mode::deepwalk, train_mode::node2vec,
                                           train_mode::line),
                         [](const auto& info) { return std::string(train_mode_name(info.param)); });

TEST(Train, ChunkedMemoryAndAdamGiveTheSameBitsOnTwoRanks) {
  train_settings s = small_settings(train_mode::deepwalk);
  s.optimizer.kind = wholestore::embedding::optimizer_kind::adam;
  s.lr = 0.01f;
  const train_result one = run_ranks(1, s);
  s.graph_type = wholememory::memory_type::chunked;
  s.table_type = wholememory::memory_type::chunked;
  EXPECT_TRUE(same_bits(one.embeddings, run_ranks(2, s).embeddings));
  s.table_type = wholememory::memory_type::distributed;
  EXPECT_TRUE(same_bits(one.embeddings, run_ranks(2, s).embeddings));
}

// The same run, bit for bit: embeddings, the loss and pair count of every epoch, the scores.
void expect_same_run(const train_result& want, const train_result& got, const std::string& what) {
  EXPECT_TRUE(same_bits(want.embeddings, got.embeddings)) << what << ": embeddings differ";
  ASSERT_EQ(got.epochs.size(), want.epochs.size()) << what;
  for (std::size_t e = 0; e < want.epochs.size(); ++e) {
    EXPECT_EQ(got.epochs[e].loss, want.epochs[e].loss) << what << ", epoch " << e + 1;
    EXPECT_EQ(got.epochs[e].pairs, want.epochs[e].pairs) << what << ", epoch " << e + 1;
  }
  EXPECT_EQ(got.final_scores.auc, want.final_scores.auc) << what;
  EXPECT_EQ(got.final_scores.hits, want.final_scores.hits) << what;
}

// A graph in distributed memory is walked collectively (random_walks_host, each step served by
// the owners of the walks' nodes) and gives the walks of continuous memory, so the run is the
// continuous graph's bit for bit on 1, 2 and 3 ranks: DeepWalk (p and q set but unused),
// node2vec with p = 0.5, q = 2 (the owners of the current nodes ask the previous nodes'
// owners), LINE (which does not walk), and with distributed
// tables beside it (both on the host communicator).
TEST(Train, DistributedGraphGivesTheContinuousGraphsBits) {
  for (train_mode mode : {train_mode::deepwalk, train_mode::node2vec, train_mode::line}) {
    train_settings s = small_settings(mode);
    if (mode == train_mode::node2vec) {  // second order: the owners ask each other
      s.p = 0.5;
      s.q = 2.0;
    }
    const train_result want = run_ranks(1, s);
    ASSERT_EQ(want.embeddings.size(), small_split().train.num_nodes * s.dim);
    ASSERT_GT(want.pairs, 0u);
    s.graph_type = wholememory::memory_type::distributed;
    for (int ranks : {1, 2, 3}) {
      expect_same_run(want, run_ranks(ranks, s),
                      std::string(train_mode_name(mode)) + ", " + std::to_string(ranks) +
                          " rank(s), distributed graph");
    }
    if (mode == train_mode::line) continue;
    s.table_type = wholememory::memory_type::distributed;
    expect_same_run(want, run_ranks(2, s),
                    std::string(train_mode_name(mode)) + ", distributed graph and tables");
  }
}

// The walks of a distributed graph are collective: a rank whose chunk of a batch is empty
// still joins them (with no walks), or the others would wait for it.  Here the last batch of
// each epoch holds one slot, so on 2 and 3 ranks rank 0 (and rank 1 of 3) walks nothing there;
// and with two slots a batch on three ranks, rank 0 walks nothing in any batch.  Every run
// ends with the continuous graph's bits, and within the thread bootstrap's 20 s.
TEST(Train, DistributedGraphWithRanksWithoutSlotsInABatch) {
  train_settings s = small_settings(train_mode::deepwalk);
  const std::uint64_t total = small_split().train.num_nodes *
                              static_cast<std::uint64_t>(s.walks_per_node) *
                              slots_per_walk(s.walk_length, s.window);
  s.batch_size = total - 1;  // two batches an epoch, the second of one slot
  auto distributed = [](train_settings d, int ranks, const wg::edge_split& split) {
    d.graph_type = wholememory::memory_type::distributed;
    train_result out;
    std::mutex m;
    wholestore_test::thread_ranks(
        ranks,
        [&](std::shared_ptr<wholememory::bootstrap> bs) {
          const bool lead = bs->rank() == 0;
          train_result r = train_embeddings(std::move(bs), split, d);
          if (lead) {
            std::lock_guard<std::mutex> lock(m);
            out = std::move(r);
          }
        },
        std::chrono::seconds(20));
    return out;
  };
  const train_result want = run_ranks(1, s);
  ASSERT_EQ(want.steps, 4u);
  for (int ranks : {2, 3}) {
    expect_same_run(want, distributed(s, ranks, small_split()),
                    "a batch of one slot, " + std::to_string(ranks) + " ranks");
  }

  // A graph small enough for a batch of two slots: 60 nodes, walks of 3 steps, window 1.
  wg::generate_options go;
  go.num_nodes = 60;
  go.num_edges = 300;
  go.seed = 4;
  go.symmetrize = true;
  go.drop_self_loops = true;
  const wg::edge_split tiny = wg::split_edges(wg::generate_graph(go), 0.1, 6);
  train_settings t = small_settings(train_mode::deepwalk);
  t.walk_length = 3;
  t.window = 1;
  t.batch_size = 2;
  t.epochs = 1;
  t.dim = 4;
  t.threads = 1;
  const train_result tiny_want = run_ranks(1, t, tiny);
  ASSERT_EQ(tiny_want.steps, 60u * 6u / 2u);
  expect_same_run(tiny_want, distributed(t, 3, tiny), "batches of two slots, 3 ranks");
}

TEST(Train, LearnsOnACommunityGraph) {
  // Two cliques joined by one edge: held-out edges sit inside cliques and every non-edge
  // across them, so a working trainer separates them.
  const wg::edge_split split = wholestore_test::two_cliques_split(60);
  train_settings s = small_settings(train_mode::deepwalk);
  s.dim = 16;
  s.epochs = 5;
  s.walks_per_node = 4;
  s.lr = 0.1f;
  const train_result r = run_ranks(1, s, split);
  EXPECT_GT(r.final_scores.auc, 0.95);
  EXPECT_LT(r.epochs.back().loss, r.epochs.front().loss);
}

TEST(Train, NodeWithoutEdgesKeepsItsInitialVector) {
  // Node 3 has no edges: walks from it end at once (pairs skipped), it is never a negative.
  wg::host_csr g;
  g.num_nodes = 5;
  g.directed = false;
  g.row_offsets = {0, 2, 4, 6, 6, 8};
  g.col_indices = {1, 2, 0, 4, 0, 4, 1, 2};
  const wg::edge_split split = wg::split_edges(g, 0.25, 2);
  train_settings s = small_settings(train_mode::deepwalk);
  s.dim = 4;
  s.hits_k = 1;
  const train_result r = run_ranks(1, s, split);
  wholestore::embedding::init_options init;
  init.method = wholestore::embedding::init_options::uniform;
  init.a = -0.5 / 4;
  init.b = 0.5 / 4;
  init.seed = wholestore::graph::mix64(s.seed ^ 0x1f83d9abfb41bd6bull);
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(r.embeddings[3 * 4 + c],
              static_cast<float>(wholestore::embedding::init_value(init, 3, c)))
        << "column " << c;
  }
  // Nodes with edges moved.
  EXPECT_NE(r.embeddings[0], static_cast<float>(wholestore::embedding::init_value(init, 0, 0)));
}

// The message of the logic_error that `s` makes train_embeddings throw.
std::string error_of(const train_settings& s, const wg::edge_split& split = small_split()) {
  auto bs = wholememory::make_thread_bootstraps(1);
  try {
    train_embeddings(std::shared_ptr<wholememory::bootstrap>(std::move(bs[0])), split, s);
  } catch (const wholememory::logic_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Train, BadSettingsNameTheProblem) {
  const train_settings good = small_settings(train_mode::node2vec);
  struct bad_case {
    std::function<void(train_settings&)> change;
    const char* message;
  };
  const std::vector<bad_case> cases = {
      {[](train_settings& s) { s.walk_length = 0; }, "walk_length must be at least 1, got 0"},
      {[](train_settings& s) { s.walk_length = -3; }, "walk_length must be at least 1, got -3"},
      {[](train_settings& s) { s.window = 0; }, "window must be at least 1, got 0"},
      {[](train_settings& s) { s.p = 0; }, "p must be a positive number, got 0"},
      {[](train_settings& s) { s.q = -1; }, "q must be a positive number, got -1"},
      {[](train_settings& s) { s.negatives = 0; }, "negatives must be at least 1, got 0"},
      {[](train_settings& s) { s.walks_per_node = 0; }, "walks_per_node must be at least 1"},
  };
  for (const bad_case& c : cases) {
    train_settings s = good;
    c.change(s);
    const std::string msg = error_of(s);
    EXPECT_NE(msg.find(c.message), std::string::npos) << "got: " << msg;
  }
}

// Ten nodes without edges: the check after the settings' fails on it, so a test of the settings
// check alone never trains (and ends at once on code without the check).
const wg::edge_split& edgeless_split() {
  static const wg::edge_split split = [] {
    wg::edge_split s;
    s.train.num_nodes = 10;
    s.train.row_offsets.assign(11, 0);
    return s;
  }();
  return split;
}

// Issue 36: negatives=100000, walk_length=100000000 or walks_per_node=100000 ran for hours
// without a word or died in an allocation.  Each setting has an upper bound, and the message
// leads with the setting and its bound, then says what would help.
TEST(Train, SettingsPastTheirBoundsNameTheBound) {
  const train_settings good = small_settings(train_mode::node2vec);
  struct bad_case {
    std::function<void(train_settings&)> change;
    const char* message;
    const char* help;
  };
  const std::vector<bad_case> cases = {
      {[](train_settings& s) { s.negatives = 1025; }, "negatives must be at most 1024, got 1025",
       "lower negatives"},
      {[](train_settings& s) { s.negatives = 100000; },
       "negatives must be at most 1024, got 100000", "word2vec, DeepWalk and node2vec use 1 to 20"},
      {[](train_settings& s) { s.window = 1025; }, "window must be at most 1024, got 1025",
       "lower window"},
      {[](train_settings& s) { s.walk_length = 100001; },
       "walk_length must be at most 100000, got 100001", "raise walks_per_node or epochs"},
      {[](train_settings& s) { s.walk_length = 100000000; },
       "walk_length must be at most 100000, got 100000000", "raise walks_per_node or epochs"},
      {[](train_settings& s) { s.walks_per_node = 10001; },
       "walks_per_node must be at most 10000, got 10001", "raise epochs"},
      {[](train_settings& s) { s.walks_per_node = 100000; },
       "walks_per_node must be at most 10000, got 100000", "raise epochs"},
      {[](train_settings& s) { s.dim = 65537; }, "dim must be at most 65536, got 65537",
       "lower dim"},
      {[](train_settings& s) { s.batch_size = (std::uint64_t{1} << 31) + 1; },
       "batch_size must be at most 2147483648 (2^31), got 2147483649", "lower batch_size"},
      {[](train_settings& s) { s.epochs = 1000001; }, "epochs must be at most 1000000, got 1000001",
       "lower epochs"},
      {[](train_settings& s) { s.hits_k = 1000001; }, "hits_k must be at most 1000000, got 1000001",
       "lower hits_k"},
  };
  for (const bad_case& c : cases) {
    train_settings s = good;
    c.change(s);
    const std::string msg = error_of(s, edgeless_split());
    EXPECT_EQ(msg.rfind(c.message, 0), 0u) << "got: " << msg;  // leads with the problem
    EXPECT_NE(msg.find(c.help), std::string::npos) << "got: " << msg;
  }
}

// Every bound is a value the trainer accepts: all of them at once pass the settings check
// (the next check, a graph without edges, is what fails), and the ones a test can afford run.
TEST(Train, SettingsAtTheirBoundsAreAccepted) {
  train_settings at = small_settings(train_mode::deepwalk);
  at.negatives = 1024;
  at.window = 1024;
  at.walk_length = 100000;
  at.walks_per_node = 10000;
  at.dim = 65536;
  at.batch_size = std::uint64_t{1} << 31;
  at.epochs = 1000000;
  at.hits_k = 1000000;
  const std::string msg = error_of(at, edgeless_split());
  EXPECT_EQ(msg.rfind("the training graph has no edges", 0), 0u) << msg;

  wg::generate_options go;
  go.num_nodes = 30;
  go.num_edges = 120;
  go.seed = 8;
  go.symmetrize = true;
  go.drop_self_loops = true;
  const wg::edge_split tiny = wg::split_edges(wg::generate_graph(go), 0.1, 9);
  train_settings s = small_settings(train_mode::deepwalk);
  s.epochs = 1;
  s.dim = 4;
  s.negatives = 1024;
  s.window = 1024;                        // wider than the walk: every pair of the walk
  s.batch_size = std::uint64_t{1} << 31;  // the whole epoch in one step
  s.hits_k = 1000000;                     // more than the non-edges: Hits@K is 1
  train_result r = run_ranks(1, s, tiny);
  EXPECT_EQ(r.steps, 1u);
  EXPECT_GT(r.pairs, 0u);
  EXPECT_EQ(r.final_scores.hits, 1.0);
  s = small_settings(train_mode::deepwalk);
  s.epochs = 1;
  s.walk_length = 1;
  s.window = 1;
  s.negatives = 1;
  s.dim = 65536;
  r = run_ranks(1, s, tiny);
  EXPECT_EQ(r.embeddings.size(), tiny.train.num_nodes * 65536);
  EXPECT_GT(r.pairs, 0u);
  s.dim = 4;
  s.walks_per_node = 10000;
  s.batch_size = std::uint64_t{1} << 20;
  r = run_ranks(1, s, tiny);
  EXPECT_EQ(r.steps, (tiny.train.num_nodes * 10000 * 2 + (1u << 20) - 1) >> 20);
}

TEST(Train, GraphWithoutEdgesIsAnError) {
  wg::edge_split split;
  split.train.num_nodes = 10;
  split.train.row_offsets.assign(11, 0);
  const std::string msg = error_of(small_settings(train_mode::deepwalk), split);
  EXPECT_NE(msg.find("the training graph has no edges"), std::string::npos) << msg;
}

TEST(Train, ResumeWithAnotherDimIsAnError) {
  const std::string dir = temp_dir("dim");
  train_settings s = small_settings(train_mode::line);
  s.epochs = 1;
  s.checkpoint_dir = dir;
  run_ranks(1, s);
  train_settings other = small_settings(train_mode::line);
  other.dim = 20;
  other.resume_dir = dir;
  const std::string msg = error_of(other);
  EXPECT_NE(msg.find("resume: the checkpoint in " + dir + " has dim 19, this run has dim 20"),
            std::string::npos)
      << msg;
  other.dim = 19;
  other.resume_dir = dir + "/nothing-here";
  EXPECT_NE(error_of(other).find("is not a train checkpoint"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Train, SlotsPerWalkCountsEveryPairInTheWindow) {
  for (int length : {1, 2, 5, 20}) {
    for (int window : {1, 2, 3, 30}) {
      std::uint64_t brute = 0;
      for (int i = 0; i <= length; ++i)
        for (int j = 0; j <= length; ++j) brute += (i != j && std::abs(i - j) <= window) ? 1 : 0;
      EXPECT_EQ(slots_per_walk(length, window), brute) << length << " " << window;
    }
  }
}

TEST(ScoreLinks, AucAndHitsOnHandCases) {
  EXPECT_EQ(score_links({3, 4}, {1, 2}, 1).auc, 1.0);
  EXPECT_EQ(score_links({1, 2}, {3, 4}, 1).auc, 0.0);
  EXPECT_EQ(score_links({1, 1}, {1, 1}, 1).auc, 0.5);  // ties count half
  // Positives 2 and 5 against negatives 1, 2, 3: 2 beats 1, ties 2 (half); 5 beats all three.
  EXPECT_DOUBLE_EQ(score_links({2, 5}, {1, 2, 3}, 1).auc, (1.5 + 3.0) / 6.0);
  // Hits@2: the 2nd highest negative is 2; positives strictly above it: 5 only.
  EXPECT_DOUBLE_EQ(score_links({2, 5}, {1, 2, 3}, 2).hits, 0.5);
  EXPECT_DOUBLE_EQ(score_links({2, 5}, {1, 2, 3}, 1).hits, 0.5);
  EXPECT_DOUBLE_EQ(score_links({2, 5}, {1, 2, 3}, 3).hits, 1.0);
  EXPECT_DOUBLE_EQ(score_links({2, 5}, {1, 2, 3}, 4).hits, 1.0);  // fewer negatives than K
  EXPECT_THROW(score_links({}, {1}, 1), wholememory::logic_error);
}

// The AUC by its definition (every positive against every negative, ties half) and Hits@k by
// counting, with a NaN score ranked as -infinity: the order score_links promises on any input.
link_scores brute_scores(const std::vector<double>& pos, const std::vector<double>& neg, int k) {
  auto rank = [](double s) { return std::isnan(s) ? -INFINITY : s; };
  double wins = 0;
  for (double p : pos)
    for (double n : neg) wins += rank(p) > rank(n) ? 1.0 : (rank(p) == rank(n) ? 0.5 : 0.0);
  link_scores out;
  out.auc = wins / static_cast<double>(pos.size() * neg.size());
  std::size_t above = 0;
  for (double p : pos) {
    std::size_t negatives_at_or_above = 0;
    for (double n : neg) negatives_at_or_above += rank(n) >= rank(p) ? 1 : 0;
    above += negatives_at_or_above < static_cast<std::size_t>(k) ? 1 : 0;
  }
  out.hits = static_cast<double>(above) / static_cast<double>(pos.size());
  return out;
}

TEST(ScoreLinks, TotalOnNaNAndInfiniteScores) {
  // The hang of issue 36: NaN scores made the tie loop stand still.
  const link_scores all_nan = score_links({NAN, NAN}, {NAN, NAN, NAN}, 2);
  EXPECT_EQ(all_nan.auc, 0.5);
  std::mt19937_64 rng(7);
  const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e300, -1e300};
  for (int round = 0; round < 200; ++round) {
    auto draw = [&](std::size_t n) {
      std::vector<double> v(n);
      for (double& x : v) {
        const auto r = rng() % 10;
        x = r < 4 ? specials[rng() % 7] : static_cast<double>(rng() % 5);  // many ties
      }
      return v;
    };
    const std::vector<double> pos = draw(1 + rng() % 20), neg = draw(1 + rng() % 20);
    const int k = 1 + static_cast<int>(rng() % neg.size());
    const link_scores got = score_links(pos, neg, k), want = brute_scores(pos, neg, k);
    EXPECT_DOUBLE_EQ(got.auc, want.auc) << "round " << round;
    EXPECT_DOUBLE_EQ(got.hits, want.hits) << "round " << round;
  }
}

// Runs `s` on `ranks` thread ranks and returns every rank's train_diverged message ("" where a
// rank finished).
std::vector<std::string> divergence_messages(int ranks, const train_settings& s) {
  std::vector<std::string> out(static_cast<std::size_t>(ranks));
  wholestore_test::thread_ranks(ranks, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    const int rank = bs->rank();
    try {
      train_embeddings(std::move(bs), small_split(), s);
    } catch (const train_diverged& e) {
      out[static_cast<std::size_t>(rank)] = e.what();
    }
  });
  return out;
}

TEST(Train, DivergenceStopsEveryRankNamingTheStepAndKeepsTheCheckpoint) {
  using wholestore::embedding::optimizer_kind;
  struct diverging {
    optimizer_kind kind;
    float lr;
  };
  for (const diverging d : {diverging{optimizer_kind::sgd, 2.0f},
                            {optimizer_kind::sgd, 5.0f},
                            {optimizer_kind::sgd, 1000.0f},
                            {optimizer_kind::adagrad, 1e30f}}) {
    const wholestore_test::temp_dir dir("train-diverge");
    const std::string ckpt = (dir.path / "ckpt").string();
    // A good epoch stored first, at a tame learning rate.
    train_settings good = small_settings(train_mode::deepwalk);
    good.dim = 8;
    good.epochs = 2;
    good.stop_after_epochs = 1;
    good.checkpoint_dir = ckpt;
    good.optimizer.kind = d.kind;
    good.lr = 0.01f;
    run_ranks(1, good);
    std::ifstream state_file(ckpt + "/state.txt");
    const std::string state((std::istreambuf_iterator<char>(state_file)), {});
    ASSERT_NE(state.find("epoch: 1"), std::string::npos) << state;

    // A new run at the diverging rate into the same directory (a resume must keep the
    // checkpoint's lr: check_resume_settings): it stops before its first store.
    train_settings bad = good;
    bad.stop_after_epochs = 0;
    bad.epochs = 3;
    bad.lr = d.lr;
    for (int ranks : {1, 2}) {
      const std::vector<std::string> msgs = divergence_messages(ranks, bad);
      for (int r = 0; r < ranks; ++r) {
        const std::string& m = msgs[static_cast<std::size_t>(r)];
        EXPECT_EQ(m.rfind("training diverged at epoch ", 0), 0u) << "lr " << d.lr << ": " << m;
        EXPECT_NE(m.find(", step "), std::string::npos) << m;
        EXPECT_NE(m.find("lower the learning rate"), std::string::npos) << m;
        EXPECT_NE(m.find(ckpt + "/epoch-1, is unchanged"), std::string::npos) << m;
        EXPECT_EQ(m, msgs[0]) << "every rank stops at the same step with the same words";
      }
      std::ifstream again(ckpt + "/state.txt");
      EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), {}), state);
      EXPECT_TRUE(fs::is_directory(ckpt + "/epoch-1/input"));
      EXPECT_FALSE(fs::exists(ckpt + "/epoch-2"));
    }
    // A resume at the diverging rate is refused before any step: another lr than the
    // checkpoint's does not continue it.
    bad.resume_dir = ckpt;
    EXPECT_NE(error_of(bad).find("was trained with lr 0.01, this run has lr "), std::string::npos);
  }
}

TEST(Train, CheckpointDirectoryWithOtherFilesIsRefusedAndKept) {
  const wholestore_test::temp_dir dir("train-ckpt-foreign");
  train_settings s = small_settings(train_mode::line);
  s.epochs = 2;
  s.checkpoint_dir = dir.str();
  // The case: a photo album and a note named like epochs.
  fs::create_directories(dir.path / "epoch-2024-photos");
  std::ofstream(dir.path / "epoch-2024-photos" / "img1.jpg") << "x";
  std::ofstream(dir.path / "epoch-notes.txt") << "y";
  std::string msg = error_of(s);
  EXPECT_EQ(msg.rfind("checkpoint: " + dir.str() + " holds '", 0), 0u) << msg;
  EXPECT_NE(msg.find("which train --checkpoint did not write"), std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(dir.path / "epoch-2024-photos" / "img1.jpg"));
  EXPECT_TRUE(fs::exists(dir.path / "epoch-notes.txt"));
  // An epoch-named directory with a file train never writes, and a state.txt of another kind.
  fs::remove_all(dir.path / "epoch-2024-photos");
  fs::remove(dir.path / "epoch-notes.txt");
  fs::create_directories(dir.path / "epoch-3");
  std::ofstream(dir.path / "epoch-3" / "mine.txt") << "z";
  EXPECT_NE(error_of(s).find("holds 'epoch-3'"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir.path / "epoch-3" / "mine.txt"));
  fs::remove_all(dir.path / "epoch-3");
  std::ofstream(dir.path / "state.txt") << "my own state\n";
  EXPECT_NE(error_of(s).find("state.txt is not a train checkpoint's state"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir.path / "state.txt"));
  fs::remove(dir.path / "state.txt");
  // What a killed store leaves (an epoch directory holding a temporary store) is ours: the run
  // goes on, replaces it, and keeps only the last epoch.
  fs::create_directories(dir.path / "epoch-1" / "input.tmp-killed");
  std::ofstream(dir.path / "epoch-1" / "input.tmp-killed" / "data.bin") << "partial";
  EXPECT_EQ(error_of(s), "(no error)");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"epoch-2", "state.txt"}));
  EXPECT_FALSE(fs::exists(dir.path / "epoch-2" / "input.tmp-killed"));
}

std::string file_text(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// One stored epoch of small_settings(mode) in `dir`; returns its settings.
train_settings store_one_epoch(const std::string& dir, train_mode mode) {
  train_settings s = small_settings(mode);
  s.epochs = 2;
  s.stop_after_epochs = 1;
  s.checkpoint_dir = dir;
  run_ranks(1, s);
  s.checkpoint_dir.clear();
  s.stop_after_epochs = 0;
  s.resume_dir = dir;
  return s;
}

TEST(Train, ResumeWithOtherSettingsIsRefusedNamingBothValues) {
  using wholestore::embedding::optimizer_kind;
  const wholestore_test::temp_dir dir("train-resume-settings");
  const train_settings same = store_one_epoch(dir.str(), train_mode::node2vec);
  const std::string state = file_text(dir.path / "state.txt");
  struct other {
    std::function<void(train_settings&)> change;
    const char* names;  // "<setting> <checkpoint's> ... <this run's>"
    const char* saved;
    const char* now;
  };
  const std::vector<other> others = {
      {[](train_settings& s) { s.seed = 12; }, "seed", "11", "12"},
      {[](train_settings& s) { s.lr = 0.2f; }, "lr", "0.1", "0.2"},
      {[](train_settings& s) { s.min_lr_fraction = 0.5f; }, "min_lr_fraction", "0.0001", "0.5"},
      {[](train_settings& s) { s.optimizer.kind = optimizer_kind::adam; }, "optimizer", "adagrad",
       "adam"},
      {[](train_settings& s) { s.walk_length = 7; }, "walk_length", "6", "7"},
      {[](train_settings& s) { s.window = 1; }, "window", "2", "1"},
      {[](train_settings& s) { s.walks_per_node = 2; }, "walks_per_node", "1", "2"},
      {[](train_settings& s) { s.p = 0.25; }, "p", "0.5", "0.25"},
      {[](train_settings& s) { s.q = 1.0 / 3; }, "q", "2", "0.3333333333333333"},
      {[](train_settings& s) { s.negatives = 4; }, "negatives", "3", "4"},
      {[](train_settings& s) { s.negatives_by_degree = false; }, "negative_distribution", "degree",
       "uniform"},
      {[](train_settings& s) { s.batch_size = 334; }, "batch_size", "333", "334"},
  };
  for (const other& o : others) {
    train_settings s = same;
    o.change(s);
    const std::string msg = error_of(s);
    const std::string want = std::string("resume: the checkpoint in ") + dir.str() +
                             " was trained with " + o.names + " " + o.saved + ", this run has " +
                             o.names + " " + o.now + " (";
    EXPECT_EQ(msg.rfind(want, 0), 0u) << msg;
    EXPECT_NE(msg.find("start a new run without --resume"), std::string::npos) << msg;
  }
  train_settings line = same;
  line.mode = train_mode::line;
  EXPECT_NE(error_of(line).find("was trained with mode node2vec, this run has line"),
            std::string::npos);
  EXPECT_EQ(file_text(dir.path / "state.txt"), state) << "a refused resume changed the state";
  // A lower learning rate resumes (the way out of a diverged run, which its message names).
  {
    const wholestore_test::temp_dir lower_dir("train-resume-lower-lr");
    train_settings lower = store_one_epoch(lower_dir.str(), train_mode::node2vec);
    lower.lr = 0.05f;
    EXPECT_EQ(error_of(lower), "(no error)");
  }
  // The same settings (threads, epochs and the checkpoint's own directory may differ) resume.
  train_settings more = same;
  more.threads = 1;
  more.epochs = 3;
  more.checkpoint_dir = dir.str();
  EXPECT_EQ(error_of(more), "(no error)");
  EXPECT_NE(file_text(dir.path / "state.txt").find("epoch: 3\n"), std::string::npos);
}

TEST(Train, DamagedStateIsRefusedNamingTheFileAndLine) {
  const wholestore_test::temp_dir dir("train-state");
  const train_settings resume = store_one_epoch(dir.str(), train_mode::deepwalk);
  const fs::path state_path = dir.path / "state.txt";
  const std::string good = file_text(state_path);
  std::vector<std::string> lines;
  {
    std::istringstream in(good);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines[0], "format: wholestore-train 2");
  ASSERT_EQ(lines[1], "epoch: 1");
  ASSERT_EQ(lines.back().rfind("curve: 1 ", 0), 0u) << good;
  const std::string last = std::to_string(lines.size());
  struct damage {
    std::function<void(std::vector<std::string>&)> change;
    std::string where;  // "line N: what"
  };
  const std::vector<damage> damages = {
      {[](auto& l) { l[1] = "epoch: 99999999999999999999"; },
       "line 2: epoch '99999999999999999999' is not a whole number in [1, 2147483647]"},
      {[](auto& l) { l[1] = "epoch: 0"; }, "line 2: epoch '0' is not a whole number"},
      {[](auto& l) { l[1] = "epoch: -1"; }, "line 2: epoch '-1' is not a whole number"},
      {[](auto& l) { l[1] = "epoch: 1x"; }, "line 2: epoch '1x' is not a whole number"},
      {[](auto& l) { l[1] = "epoch: 1 2"; }, "line 2: 'epoch:' needs 1 value(s), got 2"},
      {[](auto& l) { l.back() = "curve: garbage"; },
       "line " + last + ": 'curve:' needs 7 value(s), got 1"},
      {[](auto& l) { l.back() = "curve: 1 nan 5 1 0.5 0.5 1"; },
       "line " + last + ": 'curve: 1 nan 5 1 0.5 0.5 1' is not 'curve: EPOCH"},
      {[](auto& l) { l.back() = "curve: 1 0.5 5 1 7 0.5 1"; },
       "line " + last + ": 'curve: 1 0.5 5 1 7 0.5 1' is not"},
      {[](auto& l) { l.back() = "curve: 2 0.5 5 1 0.5 0.5 1"; },
       "line " + last + ": curve of epoch 2 where epoch 1 comes next"},
      {[](auto& l) { l.pop_back(); },
       "line " + last + ": 0 curve line(s) for epoch 1 (one per epoch done)"},
      {[](auto& l) { l.push_back(l.back()); },
       "line " + std::to_string(std::stoi(last) + 1) + ": curve of epoch 1 where epoch 2"},
      {[](auto& l) { l.insert(l.begin() + 2, "epoch: 1"); }, "line 3: 'epoch' given twice"},
      {[](auto& l) { l.insert(l.begin() + 2, "colour: blue"); }, "line 3: unknown key 'colour'"},
      {[](auto& l) { l[0] = "format: wholestore-train 3"; },
       "line 1: format 'wholestore-train 3' is not wholestore-train 1 or 2"},
      {[](auto& l) { l.erase(l.begin()); }, "line 1: the first line must be 'format: ...'"},
      {[](auto& l) {
         for (auto& x : l)
           if (x.rfind("lr: ", 0) == 0) x = "lr: abc";
       },
       ": lr 'abc' is not a positive finite number"},
      {[](auto& l) {
         l.erase(std::remove_if(l.begin(), l.end(),
                                [](const std::string& x) { return x.rfind("seed: ", 0) == 0; }),
                 l.end());
       },
       ": no 'seed:' line"},
  };
  for (const damage& d : damages) {
    std::vector<std::string> l = lines;
    d.change(l);
    std::string text;
    for (const std::string& x : l) text += x + "\n";
    std::ofstream(state_path, std::ios::trunc) << text;
    const std::string msg = error_of(resume);
    EXPECT_EQ(msg.rfind("resume: " + state_path.string() + " is not a train checkpoint state: ", 0),
              0u)
        << msg;
    EXPECT_NE(msg.find(d.where), std::string::npos) << "want: " << d.where << "\ngot: " << msg;
    // As --checkpoint: refused the same way, and the directory is left alone.
    train_settings into = small_settings(train_mode::deepwalk);
    into.checkpoint_dir = dir.str();
    const std::string claim = error_of(into);
    EXPECT_EQ(claim.rfind(
                  "checkpoint: " + state_path.string() + " is not a train checkpoint's state (", 0),
              0u)
        << claim;
    EXPECT_NE(claim.find(d.where), std::string::npos) << claim;
    EXPECT_EQ(file_text(state_path), text);
    EXPECT_TRUE(fs::is_directory(dir.path / "epoch-1" / "input"));
  }
  // A state written before the settings were recorded (format 1) still resumes.
  std::string old = "format: wholestore-train 1\n";
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string& x = lines[i];
    const std::string key = x.substr(0, x.find(':'));
    if (key == "epoch" || key == "nodes" || key == "dim" || key == "mode" || key == "curve")
      old += x + "\n";
  }
  std::ofstream(state_path, std::ios::trunc) << old;
  EXPECT_EQ(error_of(resume), "(no error)");
}

TEST(Train, KilledStoresLeftoverIsRemovedByTheNextStore) {
  // A store killed while it wrote epoch 2's input table left epoch-2/input.tmp-*; the state
  // still names epoch 1.  The next run that stores into the directory removes it.
  const wholestore_test::temp_dir dir("train-killed-store");
  train_settings resume = store_one_epoch(dir.str(), train_mode::line);
  fs::create_directories(dir.path / "epoch-2" / "input.tmp-12345-0");
  std::ofstream(dir.path / "epoch-2" / "input.tmp-12345-0" / "data.bin") << "partial";
  resume.checkpoint_dir = dir.str();
  EXPECT_EQ(error_of(resume), "(no error)");
  std::vector<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(dir.path))
    if (e.path().filename().string().find(".tmp") != std::string::npos)
      names.push_back(e.path().string());
  EXPECT_TRUE(names.empty()) << names.front();
  EXPECT_TRUE(fs::is_directory(dir.path / "epoch-2" / "input"));
  EXPECT_FALSE(fs::exists(dir.path / "epoch-1"));
  EXPECT_NE(file_text(dir.path / "state.txt").find("epoch: 2\n"), std::string::npos);
}

}  // namespace
