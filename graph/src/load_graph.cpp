/*
 * load_graph: a dataset directory into WholeMemory, every rank reading only its own parts.
 *
 * 1. Every rank reads and checks the manifest (read_manifest compares every file's size with
 *    the manifest), then opens each array file and compares its size again on the open
 *    descriptor.  A problem on any rank throws on every rank (wholememory::agree) before
 *    anything is allocated, and so do ranks that see different datasets (counts, dtypes or
 *    checksums in their manifests) or pass different load options (agree_on_values).
 *    Optional checksums are split among the ranks (file i on rank i % size) and the verdicts
 *    shared, so a mismatch also throws on every rank.
 * 2. The four arrays are created with make_graph's granularity rules (one element, or one row
 *    of features), so a part is a byte range [offset, offset + bytes) of the array and so of
 *    its file (the files are the raw arrays).  Distributed graphs keep each node's edges on
 *    the rank of its row offsets (edge_layout.hpp): before anything is allocated, every rank
 *    preads the few row offsets where the ranks' parts of row_offsets start (8 bytes each)
 *    and checks them, and the edge arrays are cut there.
 * 3. Each rank cuts the file ranges of its own parts into chunks; a few threads take chunks in
 *    turn and pread them straight into the part (host location) or into their own staging
 *    buffer, page-locked when a GPU is present, and copy_bytes on to the part (device location;
 *    copy_bytes takes any address, also a continuous range's piece on the next GPU).
 *    Each chunk of row_offsets, col_indices and edge_weights is checked (rule 6 of
 *    docs/dataset-format.md, csr_check.hpp) by the thread that read it, while the bytes are
 *    still in its cache.
 * 4. A rank's failure (I/O error, short read) is shared over the bootstrap so that every rank
 *    throws instead of waiting in the next collective.  Statistics are exchanged the same way,
 *    and then every rank's check findings: a fault in any rank's part, or between two parts,
 *    throws the same error on every rank.
 */
#include <graph/csr_graph.hpp>

#include "csr_check.hpp"
#include "edge_layout.hpp"

#include <wholememory/bootstrap.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace wholestore::graph {

namespace wm = wholememory;

namespace {

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

// An open array file, closed on destruction.
struct open_file {
  std::string path;
  int fd = -1;
  open_file() = default;
  open_file(const open_file&) = delete;
  open_file& operator=(const open_file&) = delete;
  ~open_file() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `a` and checks its size against the manifest (again: the file may have changed since
// read_manifest looked).
void open_checked(const std::string& dir, const array_file& a, open_file& f) {
  f.path = join(dir, a.name);
  f.fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  WM_EXPECTS(f.fd >= 0, f.path << ": cannot open: " << std::strerror(errno));
  struct stat st {};
  WM_EXPECTS(::fstat(f.fd, &st) == 0, f.path << ": cannot stat: " << std::strerror(errno));
  const std::uint64_t expect = a.count * wm::dtype_size(a.type);
  WM_EXPECTS(a.bytes == expect, f.path << ": the manifest says " << a.bytes << " bytes for "
                                       << a.count << " " << wm::dtype_name(a.type)
                                       << " elements, which take " << expect);
  WM_EXPECTS(static_cast<std::uint64_t>(st.st_size) == a.bytes,
             f.path << ": file has " << st.st_size << " bytes, the manifest says " << a.bytes
                    << (static_cast<std::uint64_t>(st.st_size) < a.bytes ? " (truncated)"
                                                                         : " (too long)"));
}

// Collective: an allocation for `count` elements of `elem` bytes, rows of `row_elems`
// elements never straddling parts; the same rules as make_graph (an even split of at least one
// row, unless `part_bytes` gives the parts).
wm::allocation create_array(const std::shared_ptr<wm::communicator>& comm, std::size_t count,
                            std::size_t elem, std::size_t row_elems, wm::memory_type type,
                            wm::memory_location location, const char* name,
                            const std::vector<std::size_t>& part_bytes = {}) {
  wm::allocation_options opts;
  opts.name = std::string("the graph's ") + name;
  opts.granularity = elem * std::max<std::size_t>(row_elems, 1);
  opts.part_bytes = part_bytes;
  const std::size_t bytes =
      part_bytes.empty() ? std::max<std::size_t>(count * elem, opts.granularity) : count * elem;
  return wm::allocation::create(comm, bytes, type, location, opts);
}

// Which structural check a chunk's elements get once read (csr_check.hpp).
enum class array_check { none, row_offsets, col_indices32, col_indices64, edge_weights };

// One piece of work: `bytes` bytes at `file_offset` of `fd` into `dst`.
struct chunk {
  int fd;
  const std::string* path;
  std::uint64_t file_offset;
  std::size_t bytes;
  char* dst;
  bool staged;  // dst is device memory: read into the staging buffer first
  array_check check;
};

std::size_t element_bytes(array_check check) {
  switch (check) {
    case array_check::row_offsets:
    case array_check::col_indices64:
      return 8;
    case array_check::col_indices32:
    case array_check::edge_weights:
      return 4;
    case array_check::none:
      break;
  }
  return 1;
}

// Appends the chunks of this rank's part of `mem`, whose first `have` bytes come from `f`.
// Checked arrays get chunks of whole elements (parts start on an element: the granularity),
// so each chunk is checked on its own right after its read.
void plan(const wm::allocation& mem, std::uint64_t have, const open_file& f,
          std::size_t chunk_bytes, array_check check, std::vector<chunk>& out) {
  const wm::part_info mine = mem.local_part();
  if (mine.bytes == 0 || mine.offset >= have) return;
  WM_EXPECTS(mine.ptr != nullptr, f.path << ": this rank's part is not mapped in this process");
  const std::uint64_t n = std::min<std::uint64_t>(mine.bytes, have - mine.offset);
  const bool staged = mem.location() == wm::memory_location::device;
  const std::size_t elem = element_bytes(check);
  const std::size_t step = std::max(elem, chunk_bytes / elem * elem);
  for (std::uint64_t done = 0; done < n; done += step) {
    chunk c;
    c.fd = f.fd;
    c.path = &f.path;
    c.file_offset = mine.offset + done;
    c.bytes = static_cast<std::size_t>(std::min<std::uint64_t>(step, n - done));
    c.dst = static_cast<char*>(mine.ptr) + done;
    c.staged = staged;
    c.check = check;
    out.push_back(c);
  }
}

// Checks the elements of chunk `c`, read into `data` (host memory).
void check_chunk(const chunk& c, const char* data, detail::csr_checker& checker) {
  const std::size_t elem = element_bytes(c.check);
  const std::uint64_t first = c.file_offset / elem;
  const std::size_t count = c.bytes / elem;
  switch (c.check) {
    case array_check::row_offsets:
      checker.row_offsets(reinterpret_cast<const std::int64_t*>(data), first, count);
      break;
    case array_check::col_indices32:
      checker.col_indices(reinterpret_cast<const std::int32_t*>(data), first, count);
      break;
    case array_check::col_indices64:
      checker.col_indices(reinterpret_cast<const std::int64_t*>(data), first, count);
      break;
    case array_check::edge_weights:
      checker.edge_weights(reinterpret_cast<const float*>(data), first, count);
      break;
    case array_check::none:
      break;
  }
}

// Reads exactly c.bytes at c.file_offset into buf; throws naming the file otherwise.
void pread_all(const chunk& c, char* buf) {
  std::size_t got = 0;
  while (got < c.bytes) {
    ssize_t r = ::pread(c.fd, buf + got, c.bytes - got, static_cast<off_t>(c.file_offset + got));
    if (r < 0 && errno == EINTR) continue;
    WM_EXPECTS(r >= 0, *c.path << ": read of " << c.bytes << " bytes at offset " << c.file_offset
                               << " failed: " << std::strerror(errno));
    WM_EXPECTS(r > 0, *c.path << ": file ends at " << (c.file_offset + got) << " bytes, "
                              << (c.file_offset + c.bytes) << " expected (truncated)");
    got += static_cast<std::size_t>(r);
  }
}

// The first edge of every rank's part of a distributed graph's edge arrays (edge_layout.hpp):
// the row offsets where the ranks' parts of row_offsets start, read from `f` (8 bytes each)
// and checked.  Throws logic_error naming the file for a short read or offsets that break
// rule 6 of docs/dataset-format.md.
std::vector<std::uint64_t> read_edge_cuts(const open_file& f, const manifest& m, int ranks) {
  const std::vector<std::uint64_t> nodes =
      detail::first_nodes(detail::row_offsets_partition(m.num_nodes, ranks), m.num_nodes);
  std::vector<std::int64_t> offsets(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0 && nodes[i] == nodes[i - 1]) {
      offsets[i] = offsets[i - 1];
      continue;
    }
    chunk c{f.fd, &f.path, nodes[i] * 8, 8, nullptr, false, array_check::none};
    pread_all(c, reinterpret_cast<char*>(&offsets[i]));
  }
  return detail::first_edges(f.path, m.num_nodes, m.num_edges, nodes, offsets);
}

// Runs the chunks on `threads` threads, each chunk checked by `checker` right after its read;
// progress is reported from the calling thread.  Returns the first error message ("" when all
// went well).
std::string read_chunks(const std::vector<chunk>& chunks, unsigned threads, std::size_t chunk_bytes,
                        std::uint64_t total,
                        const std::function<void(std::uint64_t, std::uint64_t)>& progress,
                        detail::csr_checker& checker) {
  std::atomic<std::size_t> next{0};
  std::atomic<std::uint64_t> done_bytes{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable cv;
  unsigned running = 0;
  std::string error;
  const bool any_staged =
      std::any_of(chunks.begin(), chunks.end(), [](const chunk& c) { return c.staged; });
  threads = std::max(1u, std::min<unsigned>(threads, static_cast<unsigned>(chunks.size())));

  // Worker threads start on device 0; device copies run on the caller's device (the rank's).
  const int device = any_staged && wm::device_count() > 0 ? wm::current_device() : -1;
  auto worker = [&] {
    try {
      if (device >= 0) wm::set_device(device);
      // The staging buffer is reused for every chunk of this thread; page-locked when a GPU
      // is present, so copy_bytes to device memory runs at the bus rate.
      std::vector<char> staging;
      wm::host_registration pinned;
      if (any_staged) {
        staging.resize(std::max<std::size_t>(chunk_bytes, 8));
        pinned = wm::host_registration(staging.data(), staging.size());
      }
      for (std::size_t i = next++; i < chunks.size() && !failed; i = next++) {
        const chunk& c = chunks[i];
        if (c.staged) {
          pread_all(c, staging.data());
          check_chunk(c, staging.data(), checker);
          wm::copy_bytes(c.dst, staging.data(), c.bytes);
        } else {
          pread_all(c, c.dst);
          check_chunk(c, c.dst, checker);
        }
        done_bytes += c.bytes;
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (!failed.exchange(true)) error = e.what();
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_all();
  };

  if (progress) progress(0, total);
  std::vector<std::thread> pool;
  running = chunks.empty() ? 0 : threads;
  if (!chunks.empty()) {
    for (unsigned t = 0; t < threads; ++t) pool.emplace_back(worker);
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return running == 0; });
      if (progress && running > 0) {
        lock.unlock();
        progress(done_bytes.load(), total);
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (progress && error.empty()) progress(done_bytes.load(), total);
  return error;
}

// Checksums of the opened files, split among the ranks (file i on rank i % size); every rank
// learns every result, so all throw naming the first file that differs.
void verify_split(wm::bootstrap& bs,
                  const std::vector<std::pair<const open_file*, const array_file*>>& files) {
  struct verdict {
    std::int64_t bad_file;  // index into files, -1 when all of this rank's files matched
    std::uint64_t actual;
  };
  verdict own{-1, 0};
  std::string error;
  try {
    std::vector<char> buf(std::size_t{4} << 20);
    for (std::size_t i = static_cast<std::size_t>(bs.rank()); i < files.size();
         i += static_cast<std::size_t>(bs.size())) {
      const open_file& f = *files[i].first;
      std::uint64_t h = fnv1a64(nullptr, 0);
      for (std::uint64_t off = 0; off < files[i].second->bytes; off += buf.size()) {
        chunk c{f.fd,
                &f.path,
                off,
                static_cast<std::size_t>(
                    std::min<std::uint64_t>(buf.size(), files[i].second->bytes - off)),
                nullptr,
                false,
                array_check::none};
        pread_all(c, buf.data());
        h = fnv1a64(buf.data(), c.bytes, h);
      }
      if (h != files[i].second->checksum) {
        own = {static_cast<std::int64_t>(i), h};
        break;
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
    own = {-2, 0};
  }
  std::vector<verdict> all(static_cast<std::size_t>(bs.size()));
  bs.allgather(&own, all.data(), sizeof(verdict));
  if (!error.empty()) WM_FAIL(wm::logic_error, error);
  for (int r = 0; r < bs.size(); ++r) {
    WM_EXPECTS(all[r].bad_file != -2, "rank " << r << " could not read a file to checksum it");
    if (all[r].bad_file >= 0) {
      const auto& [f, a] = files[static_cast<std::size_t>(all[r].bad_file)];
      WM_FAIL(wm::logic_error, f->path << ": checksum mismatch: manifest says " << std::hex << "0x"
                                       << a->checksum << ", file has 0x" << all[r].actual
                                       << std::dec << " (corrupt or modified; found by rank " << r
                                       << ")");
    }
  }
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string hex(std::uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// What every rank must load alike: the manifest's counts, dtypes and checksums of the arrays
// it loads, and the options that decide what is loaded and which collectives run.
std::vector<std::pair<std::string, std::string>> what_is_loaded(const manifest& m,
                                                                bool want_weights,
                                                                bool want_features,
                                                                const load_options& options) {
  std::vector<std::pair<std::string, std::string>> v = {
      {"num_nodes", std::to_string(m.num_nodes)},
      {"num_edges", std::to_string(m.num_edges)},
      {"directed", m.directed ? "true" : "false"},
      {"edge weights loaded", want_weights ? "yes" : "no"},
      {"node features loaded", want_features ? "yes" : "no"},
      {"verify_checksums", options.verify_checksums ? "true" : "false"},
  };
  auto array = [&](const char* key, const array_file& a) {
    v.emplace_back(std::string(key) + ".dtype", wm::dtype_name(a.type));
    v.emplace_back(std::string(key) + ".count", std::to_string(a.count));
    v.emplace_back(std::string(key) + ".checksum", hex(a.checksum));
  };
  array("row_offsets", m.row_offsets);
  array("col_indices", m.col_indices);
  if (want_weights) array("edge_weights", *m.edge_weights);
  if (want_features) {
    v.emplace_back("feature_dim", std::to_string(m.feature_dim));
    array("node_features", *m.node_features);
  }
  return v;
}

}  // namespace

csr_graph load_graph(std::shared_ptr<wm::communicator> comm, const std::string& dir,
                     const load_options& options, load_stats* stats) {
  WM_EXPECTS(comm != nullptr, "load_graph: no communicator");
  WM_EXPECTS(options.chunk_bytes > 0, "load_graph: chunk_bytes must be > 0");
  wm::bootstrap& bs = comm->get_bootstrap();
  bs.barrier();  // every rank starts the clock together
  const auto t0 = std::chrono::steady_clock::now();

  // 1. Validation.  A rank that cannot read the manifest or open a file makes every rank throw
  // (agree); then every rank compares what it is about to load with the others, so ranks
  // handed different datasets (or different load options) never build one graph out of their
  // parts.
  const std::string call = "load_graph " + dir;
  manifest m;
  bool want_weights = false, want_features = false;
  open_file row_file, col_file, weight_file, feature_file;
  wm::agree(bs, call, "reading the manifest", [&] {
    m = read_manifest(dir);
    want_weights = options.load_weights && m.edge_weights.has_value();
    want_features = options.load_features && m.node_features.has_value() && m.feature_dim > 0;
    open_checked(dir, m.row_offsets, row_file);
    open_checked(dir, m.col_indices, col_file);
    if (want_weights) open_checked(dir, *m.edge_weights, weight_file);
    if (want_features) open_checked(dir, *m.node_features, feature_file);
    WM_EXPECTS(m.row_offsets.type == wm::dtype::int64 && m.row_offsets.count == m.num_nodes + 1,
               row_file.path << ": expected " << (m.num_nodes + 1)
                             << " int64 offsets, manifest has " << m.row_offsets.count << " "
                             << wm::dtype_name(m.row_offsets.type));
    WM_EXPECTS((m.col_indices.type == wm::dtype::int32 || m.col_indices.type == wm::dtype::int64) &&
                   m.col_indices.count == m.num_edges,
               col_file.path << ": expected " << m.num_edges
                             << " int32/int64 indices, manifest has " << m.col_indices.count << " "
                             << wm::dtype_name(m.col_indices.type));
    if (want_weights) {
      WM_EXPECTS(m.edge_weights->type == wm::dtype::float32 && m.edge_weights->count == m.num_edges,
                 weight_file.path << ": expected " << m.num_edges << " float32 weights");
    }
    if (want_features) {
      WM_EXPECTS(m.node_features->count == m.num_nodes * m.feature_dim,
                 feature_file.path << ": expected " << m.num_nodes << " x " << m.feature_dim
                                   << " elements, manifest has " << m.node_features->count);
    }
    return std::string();
  });
  wm::agree_on_values(bs, call, what_is_loaded(m, want_weights, want_features, options));

  if (options.verify_checksums) {
    std::vector<std::pair<const open_file*, const array_file*>> files = {
        {&row_file, &m.row_offsets}, {&col_file, &m.col_indices}};
    if (want_weights) files.emplace_back(&weight_file, &*m.edge_weights);
    if (want_features) files.emplace_back(&feature_file, &*m.node_features);
    verify_split(bs, files);
    // The original ids are not loaded, but a damaged file is still a damaged dataset: one
    // rank reads it (it is small next to the arrays) and every rank hears the verdict.
    if (!m.node_ids_file.empty()) {  // the same on every rank: the manifests agreed
      wm::agree(bs, call, "verifying " + m.node_ids_file, [&] {
        if (bs.rank() == 0) verify_node_ids(dir, m);
        return std::string();
      });
    }
  }

  // Distributed graphs: where the edge arrays are cut (the row offsets at the ranks' first
  // nodes).  Every rank reads them from its own copy of the dataset; a rank that cannot, or
  // finds them broken, makes every rank throw, and so do ranks that read different values.
  std::vector<std::uint64_t> edge_cuts;
  if (options.type == wm::memory_type::distributed) {
    const std::vector<std::string> seen =
        wm::agree(bs, call, "reading the row offsets that split the edges among the ranks", [&] {
          edge_cuts = read_edge_cuts(row_file, m, comm->size());
          return std::string(reinterpret_cast<const char*>(edge_cuts.data()),
                             edge_cuts.size() * sizeof(std::uint64_t));
        });
    for (int r = 1; r < comm->size(); ++r) {
      WM_EXPECTS(seen[static_cast<std::size_t>(r)] == seen[0],
                 call << ": ranks 0 and " << r << " read different row offsets from "
                      << row_file.path << " where the edges are split among the ranks (the "
                      << "dataset differs between hosts; verify_checksums finds where)");
    }
  }
  auto edge_parts = [&](std::size_t elem) {
    return edge_cuts.empty() ? std::vector<std::size_t>{}
                             : detail::edge_part_bytes(edge_cuts, elem);
  };

  // 2. Allocation, with make_graph's granularity rules.
  csr_graph g;
  g.num_nodes = m.num_nodes;
  g.num_edges = m.num_edges;
  g.directed = m.directed;
  g.col_type = m.col_indices.type;
  g.row_offsets =
      create_array(comm, m.num_nodes + 1, 8, 1, options.type, options.location, "row_offsets");
  WM_EXPECTS(g.row_offsets.get_partition().offsets ==
                 detail::row_offsets_partition(m.num_nodes, comm->size()).offsets,
             call << ": internal error: row_offsets is not split as edge_layout.hpp assumes");
  const std::size_t col_elem = wm::dtype_size(g.col_type);
  g.col_indices = create_array(comm, m.num_edges, col_elem, 1, options.type, options.location,
                               "col_indices", edge_parts(col_elem));
  if (want_weights) {
    g.edge_weights = create_array(comm, m.num_edges, 4, 1, options.type, options.location,
                                  "edge_weights", edge_parts(4));
  }
  if (want_features) {
    g.feature_type = m.node_features->type;
    g.feature_dim = m.feature_dim;
    g.node_features = create_array(
        options.features_comm ? options.features_comm : comm, m.num_nodes * m.feature_dim,
        wm::dtype_size(g.feature_type), m.feature_dim, options.features_type.value_or(options.type),
        options.features_location.value_or(options.location), "node_features");
  }

  // 3. This rank's byte ranges, read in parallel.
  std::vector<chunk> chunks;
  plan(g.row_offsets, m.row_offsets.bytes, row_file, options.chunk_bytes, array_check::row_offsets,
       chunks);
  plan(g.col_indices, m.col_indices.bytes, col_file, options.chunk_bytes,
       g.col_type == wm::dtype::int32 ? array_check::col_indices32 : array_check::col_indices64,
       chunks);
  if (want_weights) {
    plan(g.edge_weights, m.edge_weights->bytes, weight_file, options.chunk_bytes,
         array_check::edge_weights, chunks);
  }
  if (want_features) {
    plan(g.node_features, m.node_features->bytes, feature_file, options.chunk_bytes,
         array_check::none, chunks);
  }
  std::uint64_t local_bytes = 0;
  for (const chunk& c : chunks) local_bytes += c.bytes;
  unsigned threads = options.threads;
  if (threads == 0) threads = std::min(4u, wm::default_host_threads());
  detail::csr_checker checker("dataset " + dir, m.num_nodes, m.num_edges);
  std::string error =
      read_chunks(chunks, threads, options.chunk_bytes, local_bytes, options.progress, checker);

  // 4. Outcome and statistics of every rank, then the structure: every rank merges every
  // rank's findings and throws the same first fault (rule 6), or none does.
  struct rank_result {
    double seconds;
    double validate_seconds;
    std::uint64_t bytes;
    std::uint64_t failed;
  };
  rank_result own{seconds_since(t0), checker.seconds(), local_bytes, error.empty() ? 0u : 1u};
  std::vector<rank_result> all(static_cast<std::size_t>(comm->size()));
  bs.allgather(&own, all.data(), sizeof(rank_result));
  if (!error.empty()) WM_FAIL(wm::logic_error, "load_graph " << dir << ": " << error);
  for (int r = 0; r < comm->size(); ++r) {
    WM_EXPECTS(all[r].failed == 0, "load_graph " << dir << ": rank " << r
                                                 << " failed to read its part (see its error)");
  }
  detail::agree_on_findings(bs, checker);
  if (stats) {
    stats->seconds = 0;
    stats->validate_seconds = 0;
    stats->total_bytes = 0;
    for (const rank_result& r : all) {
      stats->seconds = std::max(stats->seconds, r.seconds);
      stats->validate_seconds = std::max(stats->validate_seconds, r.validate_seconds);
      stats->total_bytes += r.bytes;
    }
    stats->local_bytes = local_bytes;
  }
  return g;
}

}  // namespace wholestore::graph
