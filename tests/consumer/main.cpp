// Uses each installed library once through its public headers: a one-rank WholeMemory in
// host memory written and gathered back, a generated graph's shape, the rows of an embedding
// table after one SGD step, and the trainer's link scores and pair slots.  Prints what it
// checked; exits 1 on any mismatch.
#include <embedding/table.hpp>
#include <graph/generate.hpp>
#include <train/trainer.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/gather.hpp>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
  if (!ok) ++failures;
}

}  // namespace

int main() try {
  // One rank, no launch environment.
  auto comm = wholememory::make_host_communicator(wholememory::make_job_bootstrap());
  check(comm->size() == 1, "a job of one rank");

  // A 1000 x 2 int64 matrix in host memory: row r holds (r, r * r); two rows gathered back.
  constexpr std::size_t rows = 1000, cols = 2;
  auto wm = wholememory::allocation::create(comm, rows * cols * sizeof(std::int64_t),
                                            wholememory::memory_type::continuous,
                                            wholememory::memory_location::host);
  auto* values = static_cast<std::int64_t*>(wm.data());
  for (std::size_t r = 0; r < rows; ++r) {
    values[r * cols] = static_cast<std::int64_t>(r);
    values[r * cols + 1] = static_cast<std::int64_t>(r * r);
  }
  const std::vector<std::int64_t> wanted = {999, 0, 31};
  std::vector<std::int64_t> got(wanted.size() * cols, -1);
  wholememory::gather_host({&wm, wholememory::dtype::int64, rows, cols, cols, 0},
                           {wanted.data(), wholememory::dtype::int64, wanted.size()},
                           {got.data(), wholememory::dtype::int64, wanted.size(), cols, cols}, 1);
  bool same = true;
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    same = same && got[i * cols] == wanted[i] && got[i * cols + 1] == wanted[i] * wanted[i];
  }
  check(same, "wholememory: rows gathered back as written");

  wholestore::graph::generate_options g;
  g.num_nodes = 64;
  g.num_edges = 256;
  g.seed = 7;
  g.threads = 1;
  const wholestore::graph::host_csr csr = wholestore::graph::generate_graph(g);
  check(csr.num_nodes == 64 && csr.row_offsets.size() == 65 &&
            csr.row_offsets.back() == static_cast<std::int64_t>(csr.num_edges()),
        "graph: generated CSR has num_nodes + 1 offsets ending at num_edges");

  namespace emb = wholestore::embedding;
  emb::table_options o;
  o.rows = 10;
  o.dim = 4;
  o.init.method = emb::init_options::zeros;
  o.optimizer.kind = emb::optimizer_kind::sgd;
  emb::table t = emb::table::create(comm, o);
  const std::vector<std::int64_t> ids = {3, 9};
  const wholememory::index_array idx{ids.data(), wholememory::dtype::int64, ids.size()};
  std::vector<float> grads(ids.size() * o.dim, 2.0f);
  t.apply_gradients_host(idx, {grads.data(), wholememory::dtype::float32, ids.size(), o.dim, o.dim},
                         0.5f, 1);
  std::vector<float> looked_up(ids.size() * o.dim, 0.0f);
  t.lookup_host(idx, {looked_up.data(), wholememory::dtype::float32, ids.size(), o.dim, o.dim}, 1);
  bool updated = true;
  for (float w : looked_up) updated = updated && w == -1.0f;  // 0 - 0.5 * 2, exact in float32
  check(t.step() == 1 && updated, "embedding: one SGD step from zeros gives -lr * g");

  namespace tr = wholestore::train;
  // Walks of 2 steps, window 1: (0, 1), (1, 0), (1, 2), (2, 1).
  check(tr::slots_per_walk(2, 1) == 4 && tr::score_links({3, 1}, {2}, 1).auc == 0.5,
        "train: pair slots of a walk and ROC-AUC of a hand case");

  t.free();
  wm.free();
  std::printf("%s\n", failures == 0 ? "consumer: all checks passed" : "consumer: FAILED");
  return failures == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "consumer: %s\n", e.what());
  return 1;
}
