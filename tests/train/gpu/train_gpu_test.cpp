// The trainer on the GPU (train/trainer.hpp, use_gpu): the same embeddings and loss
// curve bit for bit as the CPU path for every mode, with the tables in device memory or in host
// memory, continuous or chunked (one rank: the output table's gradients by reference, the next
// batch's walks overlapping the step), for two processes sharing GPU 0, for two GPUs with
// distributed tables (NCCL), and for a graph in distributed memory on one and two GPUs (the
// walker's collective walks over NCCL, on the step stream).
// Every body runs in a forked child, so the test process never initializes CUDA (a forked
// child of a process that did could not use it).
#include "common/gpu_count.hpp"
#include "common/multiprocess.hpp"

#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <train/trainer.hpp>
#include <wholememory/device.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

using wholestore_test::gpu_count;

using namespace wholestore::train;
namespace wg = wholestore::graph;
namespace wm = wholememory;

wg::edge_split make_split() {
  wg::generate_options go;
  go.num_nodes = 500;
  go.num_edges = 4000;
  go.seed = 8;
  go.symmetrize = true;
  go.drop_self_loops = true;
  return wg::split_edges(wg::generate_graph(go), 0.1, 3);
}

train_settings settings(train_mode mode) {
  train_settings s;
  s.mode = mode;
  s.walk_length = 8;
  s.window = 3;
  s.walks_per_node = 2;
  s.p = 0.25;
  s.q = 4.0;
  s.negatives = 5;
  s.dim = 40;
  s.batch_size = 1000;
  s.epochs = 2;
  s.seed = 21;
  s.hits_k = 20;
  s.threads = 2;
  return s;
}

train_result run(int ranks, const wg::edge_split& split, const train_settings& s) {
  train_result out;
  std::mutex m;
  wholestore_test::thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
    const bool lead = bs->rank() == 0;
    train_result r = train_embeddings(std::move(bs), split, s);
    if (lead) {
      std::lock_guard<std::mutex> lock(m);
      out = std::move(r);
    }
  });
  return out;
}

void expect_same(const train_result& cpu, const train_result& gpu, const std::string& what) {
  ASSERT_EQ(cpu.embeddings.size(), gpu.embeddings.size()) << what;
  EXPECT_EQ(std::memcmp(cpu.embeddings.data(), gpu.embeddings.data(),
                        cpu.embeddings.size() * sizeof(float)),
            0)
      << what << ": embeddings differ";
  ASSERT_EQ(cpu.epochs.size(), gpu.epochs.size()) << what;
  for (std::size_t e = 0; e < cpu.epochs.size(); ++e)
    EXPECT_EQ(cpu.epochs[e].loss, gpu.epochs[e].loss) << what << ", epoch " << e + 1;
  EXPECT_EQ(cpu.final_scores.auc, gpu.final_scores.auc) << what;
}

TEST(TrainGpu, SameBitsAsCpu) {
  if (gpu_count() < 1) GTEST_SKIP() << "needs 1 CUDA device, 0 visible";
  const auto result = wholestore_test::fork_ranks(1, [](std::shared_ptr<wm::bootstrap>) {
    const wg::edge_split split = make_split();
    for (train_mode mode : {train_mode::deepwalk, train_mode::node2vec, train_mode::line}) {
      const train_settings cpu_s = settings(mode);
      const train_result cpu = run(1, split, cpu_s);
      train_settings g = cpu_s;
      g.use_gpu = true;
      g.table_location = wm::memory_location::device;
      g.graph_location = wm::memory_location::device;
      const std::string name = train_mode_name(mode);
      expect_same(cpu, run(1, split, g), name + ", device tables and graph");
      g.table_location = wm::memory_location::host;
      g.graph_location = wm::memory_location::host;
      expect_same(cpu, run(1, split, g), name + ", host tables on the GPU path");
      // Chunked tables: the output table's update reads the input rows through a chunked view.
      g.table_type = wm::memory_type::chunked;
      g.table_location = wm::memory_location::device;
      expect_same(cpu, run(1, split, g), name + ", chunked device tables");
    }
  });
  EXPECT_TRUE(result.all_ok()) << "the GPU child failed";
}

// Two processes on the GPU path (GPU 0 shared, host communicator) against one CPU rank.
TEST(TrainGpu, TwoProcessesSameBitsAsOneCpuRank) {
  if (gpu_count() < 1) GTEST_SKIP() << "needs 1 CUDA device, 0 visible";
  const auto result = wholestore_test::fork_ranks(2, [](std::shared_ptr<wm::bootstrap> bs) {
    const wg::edge_split split = make_split();
    for (auto type : {wm::memory_type::continuous, wm::memory_type::chunked}) {
      train_settings s = settings(train_mode::node2vec);
      const bool lead = bs->rank() == 0;
      train_result cpu;
      if (lead) cpu = run(1, split, s);
      s.use_gpu = true;
      s.table_location = wm::memory_location::device;
      s.table_type = type;
      const train_result gpu = train_embeddings(bs, split, s);
      if (lead) expect_same(cpu, gpu, std::string("2 ranks, ") + wm::memory_type_name(type));
    }
  });
  EXPECT_TRUE(result.all_ok()) << "a GPU rank failed";
}

// Two processes with a GPU each and distributed tables (an NCCL communicator: lookups and
// updates exchange rows) against one CPU rank.
TEST(TrainGpu, TwoGpusDistributedTablesSameBitsAsOneCpuRank) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << gpu_count() << " visible";
  const auto result = wholestore_test::fork_ranks(2, [](std::shared_ptr<wm::bootstrap> bs) {
    const wg::edge_split split = make_split();
    train_settings s = settings(train_mode::deepwalk);
    const bool lead = bs->rank() == 0;
    train_result cpu;
    if (lead) cpu = run(1, split, s);
    s.use_gpu = true;
    s.graph_location = wm::memory_location::device;
    s.table_location = wm::memory_location::device;
    s.table_type = wm::memory_type::distributed;
    const train_result gpu = train_embeddings(bs, split, s);
    if (lead) expect_same(cpu, gpu, "2 GPUs, distributed tables");
  });
  EXPECT_TRUE(result.all_ok()) << "a GPU rank failed";
}

// Continuous and chunked tables with one GPU per rank go over NCCL; the step's loss totals are
// then summed on the device (no bootstrap round a step), which is also the step's fence.  Two,
// three and four GPUs where present, each against one CPU rank bit for bit, loss curve
// included; and a diverging run still stops every rank at the same step.
TEST(TrainGpu, GpusOverNcclSameBitsAsOneCpuRankAndStopTogetherOnDivergence) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << gpu_count() << " visible";
  for (int ranks = 2; ranks <= std::min(4, gpu_count()); ++ranks) {
    for (wm::memory_type type : {wm::memory_type::continuous, wm::memory_type::chunked}) {
      const auto result =
          wholestore_test::fork_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
            const wg::edge_split split = make_split();
            train_settings s = settings(train_mode::deepwalk);
            const bool lead = bs->rank() == 0;
            train_result cpu;
            if (lead) cpu = run(1, split, s);
            s.use_gpu = true;
            s.graph_location = wm::memory_location::device;
            s.table_location = wm::memory_location::device;
            s.table_type = type;
            const train_result gpu = train_embeddings(bs, split, s);
            if (lead) {
              expect_same(
                  cpu, gpu,
                  std::to_string(ranks) + " GPUs, " + wm::memory_type_name(type) + " tables");
            }
            s.optimizer.kind = wholestore::embedding::optimizer_kind::sgd;
            s.lr = 1000.0f;
            std::string message;
            try {
              train_embeddings(bs, split, s);
            } catch (const train_diverged& e) {
              message = e.what();
            }
            EXPECT_EQ(message.rfind("training diverged at epoch 1, step ", 0), 0u) << message;
            // Every rank stops at the same step: rank 0's words on every rank.
            std::vector<char> mine(512, 0), all(512 * static_cast<std::size_t>(bs->size()));
            std::copy_n(message.begin(), std::min<std::size_t>(message.size(), 511), mine.begin());
            bs->allgather(mine.data(), all.data(), mine.size());
            for (int r = 1; r < bs->size(); ++r)
              EXPECT_EQ(std::string(all.data() + 512 * r), std::string(all.data())) << "rank " << r;
          });
      EXPECT_TRUE(result.all_ok()) << ranks << " GPUs, a rank failed";
    }
  }
}

// A graph in distributed memory on the GPU path: train gives it an NCCL communicator and the
// GPU walker walks it collectively on the step stream (not overlapped with the step), so the
// run is the CPU path's on a continuous graph, bit for bit.  One GPU: DeepWalk and LINE, the
// graph in device and in host memory.
TEST(TrainGpu, OneGpuDistributedGraphSameBitsAsCpu) {
  if (gpu_count() < 1) GTEST_SKIP() << "needs 1 CUDA device, 0 visible";
  const auto result = wholestore_test::fork_ranks(1, [](std::shared_ptr<wm::bootstrap>) {
    const wg::edge_split split = make_split();
    for (train_mode mode : {train_mode::deepwalk, train_mode::line}) {
      const train_settings cpu_s = settings(mode);
      const train_result cpu = run(1, split, cpu_s);
      train_settings g = cpu_s;
      g.use_gpu = true;
      g.graph_type = wm::memory_type::distributed;
      g.table_location = wm::memory_location::device;
      const std::string name = train_mode_name(mode);
      for (auto location : {wm::memory_location::device, wm::memory_location::host}) {
        g.graph_location = location;
        expect_same(
            cpu, run(1, split, g),
            name + ", distributed graph in " + wm::memory_location_name(location) + " memory");
      }
    }
  });
  EXPECT_TRUE(result.all_ok()) << "the GPU child failed";
}

// Two GPUs, a distributed graph in device memory, continuous and distributed tables, with a
// last batch of one slot an epoch: rank 0 has nothing to walk there and still joins the
// collective walks.
TEST(TrainGpu, TwoGpusDistributedGraphSameBitsAsOneCpuRank) {
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 CUDA devices, " << gpu_count() << " visible";
  const auto result = wholestore_test::fork_ranks(2, [](std::shared_ptr<wm::bootstrap> bs) {
    const wg::edge_split split = make_split();
    train_settings s = settings(train_mode::deepwalk);
    s.batch_size = split.train.num_nodes * static_cast<std::uint64_t>(s.walks_per_node) *
                       slots_per_walk(s.walk_length, s.window) -
                   1;
    const bool lead = bs->rank() == 0;
    train_result cpu;
    if (lead) cpu = run(1, split, s);
    s.use_gpu = true;
    s.graph_type = wm::memory_type::distributed;
    s.graph_location = wm::memory_location::device;
    s.table_location = wm::memory_location::device;
    for (auto tables : {wm::memory_type::continuous, wm::memory_type::distributed}) {
      s.table_type = tables;
      const train_result gpu = train_embeddings(bs, split, s);
      if (lead) {
        expect_same(
            cpu, gpu,
            std::string("2 GPUs, distributed graph, ") + wm::memory_type_name(tables) + " tables");
      }
    }
  });
  EXPECT_TRUE(result.all_ok()) << "a GPU rank failed";
}

}  // namespace

// The blocks schedule on the GPU path: one GPU (device and host tables, DeepWalk and LINE, Adam)
// and one GPU per rank over NCCL (2 and 4 where present: the episode's pairs exchanged by
// NCCL, the partitions copied between GPUs in place) against one CPU rank, bit for bit.
TEST(TrainGpu, BlocksScheduleSameBitsAsOneCpuRank) {
  if (gpu_count() < 1) GTEST_SKIP() << "needs 1 CUDA device, 0 visible";
  auto blocks = [](train_mode mode) {
    train_settings s = settings(mode);
    s.schedule = train_schedule::blocks;
    s.partitions = 4;
    s.block_steps = 3;
    s.optimizer.kind = wholestore::embedding::optimizer_kind::adam;
    s.lr = 0.01f;
    return s;
  };
  const auto one = wholestore_test::fork_ranks(1, [&](std::shared_ptr<wm::bootstrap>) {
    const wg::edge_split split = make_split();
    for (train_mode mode : {train_mode::deepwalk, train_mode::line}) {
      train_settings s = blocks(mode);
      const train_result cpu = run(1, split, s);
      s.use_gpu = true;
      s.graph_location = wm::memory_location::device;
      s.table_location = wm::memory_location::device;
      expect_same(cpu, run(1, split, s), std::string(train_mode_name(mode)) + ", 1 GPU");
      s.table_location = wm::memory_location::host;
      expect_same(cpu, run(1, split, s), std::string(train_mode_name(mode)) + ", host tables");
    }
  });
  EXPECT_TRUE(one.all_ok()) << "the GPU child failed";
  for (int ranks : {2, 4}) {
    if (ranks > gpu_count()) continue;
    const auto result = wholestore_test::fork_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
      const wg::edge_split split = make_split();
      train_settings s = blocks(train_mode::deepwalk);
      const bool lead = bs->rank() == 0;
      train_result cpu;
      if (lead) cpu = run(1, split, s);
      s.use_gpu = true;
      s.graph_location = wm::memory_location::device;
      s.table_location = wm::memory_location::device;
      const train_result gpu = train_embeddings(bs, split, s);
      if (lead) expect_same(cpu, gpu, std::to_string(ranks) + " GPUs, blocks");
      s.replicate_graph = true;  // walks on each GPU's own copy of the graph
      const train_result replicated = train_embeddings(bs, split, s);
      if (lead) expect_same(cpu, replicated, std::to_string(ranks) + " GPUs, replicated graph");
    });
    EXPECT_TRUE(result.all_ok()) << ranks << " GPUs, a rank failed";
  }
}
