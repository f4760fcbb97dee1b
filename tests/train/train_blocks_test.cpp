// The trainer's `blocks` schedule (train/trainer.hpp) on small graphs, ranks as threads: the
// same embeddings and loss figures bit for bit on every rank count that divides the partitions
// (DeepWalk, LINE, Adam and AdaGrad, several episodes an epoch); it learns what the global
// schedule learns; a node without edges keeps its initial vector through the partition moves;
// a run resumed from its checkpoint on another rank count ends with the same bits; bad
// settings fail naming the problem.
#include "train_ranks.hpp"

#include <embedding/table.hpp>
#include <graph/random.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

namespace {

using namespace wholestore::train;
using wholestore_test::same_bits;
using wholestore_test::train_on_ranks;
namespace fs = std::filesystem;

train_settings blocks_settings(train_mode mode, int partitions) {
  train_settings s;
  s.mode = mode;
  s.schedule = train_schedule::blocks;
  s.partitions = partitions;
  s.block_steps = 2;  // episodes of 2 * 333 * P slots: several an epoch
  s.walk_length = 6;
  s.window = 2;
  s.walks_per_node = 1;
  s.negatives = 3;
  s.dim = 19;
  s.batch_size = 333;
  s.epochs = 2;
  s.seed = 11;
  s.hits_k = 10;
  s.threads = 2;
  return s;
}

void expect_same_run(const train_result& want, const train_result& got, const std::string& what) {
  EXPECT_TRUE(same_bits(want.embeddings, got.embeddings)) << what;
  ASSERT_EQ(got.epochs.size(), want.epochs.size()) << what;
  for (std::size_t e = 0; e < got.epochs.size(); ++e) {
    EXPECT_EQ(got.epochs[e].loss, want.epochs[e].loss) << what << ", epoch " << e + 1;
    EXPECT_EQ(got.epochs[e].pairs, want.epochs[e].pairs) << what << ", epoch " << e + 1;
  }
  EXPECT_EQ(got.final_scores.auc, want.final_scores.auc) << what;
}

TEST(TrainBlocks, SameBitsOnEveryRankCountThatDividesThePartitions) {
  for (train_mode mode : {train_mode::deepwalk, train_mode::line}) {
    const train_settings s = blocks_settings(mode, 4);
    const train_result one = train_on_ranks(1, s);
    ASSERT_EQ(one.embeddings.size(), wholestore_test::small_train_split().train.num_nodes * s.dim);
    EXPECT_GT(one.pairs, 0u);
    for (int ranks : {2, 4})
      expect_same_run(one, train_on_ranks(ranks, s),
                      std::string(train_mode_name(mode)) + ", " + std::to_string(ranks) + " ranks");
  }
  // Every rank with its own copy of the graph: the same run.
  train_settings replicated = blocks_settings(train_mode::deepwalk, 4);
  const train_result want = train_on_ranks(1, replicated);
  replicated.replicate_graph = true;
  expect_same_run(want, train_on_ranks(4, replicated), "replicated graph, 4 ranks");
  // Six partitions on 1 and 3 ranks, Adam (its moments move with the partitions).
  train_settings s = blocks_settings(train_mode::deepwalk, 6);
  s.optimizer.kind = wholestore::embedding::optimizer_kind::adam;
  s.lr = 0.01f;
  expect_same_run(train_on_ranks(1, s), train_on_ranks(3, s), "6 partitions, adam, 3 ranks");
}

TEST(TrainBlocks, EpisodeLengthByStepsOrBySlotsPerNode) {
  train_settings s = blocks_settings(train_mode::deepwalk, 4);
  EXPECT_EQ(episode_slots(s, 400, 4), 2u * 333 * 4);
  s.block_steps = 0;  // 32 slots a node: 12800, in whole rounds of 1332 slots
  EXPECT_EQ(episode_slots(s, 400, 4), 9u * 1332);
  EXPECT_EQ(episode_slots(s, 10, 4), 1332u);  // at least one round
  // Auto episodes on the small graph: the same bits on 1 and 2 ranks.
  const train_result one = train_on_ranks(1, s);
  EXPECT_TRUE(same_bits(one.embeddings, train_on_ranks(2, s).embeddings));
}

TEST(TrainBlocks, LearnsLikeTheGlobalSchedule) {
  const auto split = wholestore_test::two_cliques_split(60);
  train_settings s = blocks_settings(train_mode::deepwalk, 4);
  s.dim = 16;
  s.epochs = 5;
  s.walks_per_node = 4;
  s.lr = 0.1f;
  const train_result blocks = train_on_ranks(2, s, split);
  train_settings g = s;
  g.schedule = train_schedule::global;
  const train_result global = train_on_ranks(1, g, split);
  EXPECT_GT(blocks.final_scores.auc, 0.95);
  EXPECT_NEAR(blocks.final_scores.auc, global.final_scores.auc, 0.03);
  EXPECT_LT(blocks.epochs.back().loss, blocks.epochs.front().loss);
  EXPECT_FALSE(same_bits(blocks.embeddings, global.embeddings));  // another trajectory
}

TEST(TrainBlocks, NodeWithoutEdgesKeepsItsInitialVector) {
  // Node 3 has no edges: it is in no pair, but its partition moves every round.
  wholestore::graph::host_csr g;
  g.num_nodes = 5;
  g.directed = false;
  g.row_offsets = {0, 2, 4, 6, 6, 8};
  g.col_indices = {1, 2, 0, 4, 0, 4, 1, 2};
  const auto split = wholestore::graph::split_edges(g, 0.25, 2);
  train_settings s = blocks_settings(train_mode::deepwalk, 2);
  s.dim = 4;
  s.hits_k = 1;
  const train_result r = train_on_ranks(2, s, split);
  wholestore::embedding::init_options init;
  init.method = wholestore::embedding::init_options::uniform;
  init.a = -0.5 / 4;
  init.b = 0.5 / 4;
  init.seed = wholestore::graph::mix64(s.seed ^ 0x1f83d9abfb41bd6bull);
  for (std::size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(r.embeddings[3 * 4 + c],
              static_cast<float>(wholestore::embedding::init_value(init, 3, c)))
        << "column " << c;
    EXPECT_NE(r.embeddings[0 * 4 + c],
              static_cast<float>(wholestore::embedding::init_value(init, 0, c)));
  }
}

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() /
                     ("wholestore-blocks-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  return p.string();
}

std::string error_of(const train_settings& s, int ranks = 1) {
  std::string message = "(no error)";
  std::mutex m;
  wholestore_test::thread_ranks(ranks, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    const bool lead = bs->rank() == 0;
    try {
      train_embeddings(std::move(bs), wholestore_test::small_train_split(), s);
    } catch (const wholememory::logic_error& e) {
      if (lead) {
        std::lock_guard<std::mutex> lock(m);
        message = e.what();
      }
    }
  });
  return message;
}

TEST(TrainBlocks, ResumedOnAnotherRankCountEqualsUninterrupted) {
  const train_settings s = blocks_settings(train_mode::deepwalk, 4);
  const train_result whole = train_on_ranks(1, s);
  const std::string dir = temp_dir("resume");
  train_settings first = s;
  first.checkpoint_dir = dir;
  first.stop_after_epochs = 1;
  EXPECT_EQ(train_on_ranks(4, first).last_epoch, 1);
  train_settings rest = s;
  rest.resume_dir = dir;
  expect_same_run(whole, train_on_ranks(2, rest), "resumed on 2 ranks");
  // Another partition count or schedule is another trajectory: refused, naming both.
  rest.partitions = 2;
  EXPECT_NE(error_of(rest, 2).find("was trained with partitions 4, this run has partitions 2"),
            std::string::npos)
      << error_of(rest, 2);
  rest.partitions = 4;
  rest.schedule = train_schedule::global;
  EXPECT_NE(error_of(rest).find("was trained with schedule blocks, this run has schedule global"),
            std::string::npos)
      << error_of(rest);
  fs::remove_all(dir);
}

TEST(TrainBlocks, BadSettingsNameTheProblem) {
  train_settings s = blocks_settings(train_mode::deepwalk, 3);
  EXPECT_NE(error_of(s, 2).find("partitions must be a multiple of the 2 ranks, got 3"),
            std::string::npos)
      << error_of(s, 2);
  s.partitions = 401;
  EXPECT_NE(error_of(s).find("401 partitions of a graph of 400 nodes"), std::string::npos)
      << error_of(s);
  s.partitions = 2;
  s.block_steps = -1;
  EXPECT_NE(error_of(s).find("block_steps must be >= 0, got -1"), std::string::npos) << error_of(s);
  s.block_steps = 2;
  s.table_type = wholememory::memory_type::distributed;
  EXPECT_NE(error_of(s).find("schedule blocks needs continuous or chunked tables"),
            std::string::npos)
      << error_of(s);
}

}  // namespace
