/*
 * load_options::features_comm: the graph's arrays over one communicator and the features over
 * another, the seed's multi-node layout (a copy of the graph per host, the features distributed
 * over every rank) built on one host: four thread ranks, the graph continuous over each pair's
 * communicator (two copies), the features distributed over all four.  make_graph and
 * load_graph; every rank reads the whole graph from its copy and gathers every node's features,
 * both compared with the host graph they came from.
 */
#include "common/multiprocess.hpp"

#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <graph/generate.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/gather.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

namespace fs = std::filesystem;
namespace wm = ::wholememory;
using namespace wholestore::graph;

host_csr featured_graph() {
  generate_options o;
  o.num_nodes = 1501;
  o.num_edges = 12000;
  o.seed = 9;
  o.feature_dim = 7;
  o.threads = 1;
  return generate_graph(o);
}

void check_graph(const csr_graph& g, const host_csr& want, int rank) {
  SCOPED_TRACE("rank " + std::to_string(rank));
  ASSERT_EQ(g.num_nodes, want.num_nodes);
  ASSERT_EQ(g.row_offsets.comm().size(), 2);  // the pair's copy
  ASSERT_EQ(g.node_features.comm().size(), 4);
  EXPECT_EQ(g.node_features.type(), wm::memory_type::distributed);
  // The copy is continuous over the pair: every byte of it is readable here.
  const auto* rows = static_cast<const std::int64_t*>(g.row_offsets.data());
  EXPECT_TRUE(std::equal(want.row_offsets.begin(), want.row_offsets.end(), rows));
  // Every node's features, gathered over all four ranks (collective).
  std::vector<std::int64_t> ids(want.num_nodes);
  std::iota(ids.begin(), ids.end(), 0);
  std::vector<float> got(want.num_nodes * want.feature_dim, -7.0f);
  wm::gather_host(g.features_tensor(), wm::index_array{ids.data(), wm::dtype::int64, ids.size()},
                  wm::dense_matrix{got.data(), wm::dtype::float32, ids.size(), want.feature_dim,
                                   want.feature_dim},
                  1);
  EXPECT_EQ(got, want.node_features);
}

TEST(FeaturesComm, GraphPerPairFeaturesOverEveryRank) {
  const host_csr host = featured_graph();
  const fs::path dir =
      fs::temp_directory_path() / ("features_comm_test." + std::to_string(::getpid()));
  fs::remove_all(dir);
  write_dataset(dir.string(), host);
  thread_ranks(4, [&](std::shared_ptr<wm::bootstrap> bs) {
    const int me = bs->rank();
    auto all = wm::make_host_communicator(bs);
    auto pair = wm::make_host_communicator(std::shared_ptr<wm::bootstrap>(bs->split(me / 2, me)));
    load_options where;
    where.type = wm::memory_type::continuous;
    where.features_type = wm::memory_type::distributed;
    where.features_comm = all;
    check_graph(make_graph(pair, host, where), host, me);
    check_graph(load_graph(pair, dir.string(), where), host, me);
  });
  fs::remove_all(dir);
}

}  // namespace
}  // namespace wholestore_test
