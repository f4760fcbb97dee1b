// The CPU sampler: sample_host and the small helpers of sampling.hpp.
//
// A hop has three steps over its destination nodes: count how many positions every node
// yields, prefix-sum the counts into the block's offsets, then fill each node's slice of the
// edge list (detail::select_* and the weighted race below).  Nodes are independent, so the
// counting and filling run on worker threads in dynamically taken chunks (degrees are skewed).
// Relabelling then walks the hop's edge list once, in order, through an open-addressing map,
// because first occurrence defines the local ids; the map carries over to the next hop, whose
// dst nodes are exactly the nodes already in it.
//
// Continuous and chunked graphs are read in place through PtrGen.  A distributed graph whose
// edges follow its nodes (csr_graph.hpp, the layout make_graph and load_graph give) has every
// hop of fanout >= 0 served by the owners of its nodes: each rank sends its dst nodes to their
// owners, which sample them from their own parts and reply with the neighbors (three
// exchanges a hop).  Other distributed graphs, and hops of fanout -1, fetch just the values
// each hop needs with gather_host.  All run the same selection, in a fixed sequence of
// collective calls, so every path returns the same blocks.
#include "owned_rows_host.hpp"
#include "parallel_host.hpp"

#include <graph/sampling.hpp>

#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/ptr_gen.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace wholestore::graph {

namespace wm = wholememory;

const char* sample_method_name(sample_method m) {
  switch (m) {
    case sample_method::uniform:
      return "uniform";
    case sample_method::uniform_with_replacement:
      return "uniform_with_replacement";
    case sample_method::weighted:
      return "weighted";
  }
  return "unknown";
}

sample_method parse_sample_method(const std::string& name) {
  if (name == "uniform") return sample_method::uniform;
  if (name == "uniform_with_replacement" || name == "replacement") {
    return sample_method::uniform_with_replacement;
  }
  if (name == "weighted") return sample_method::weighted;
  WM_FAIL(wm::logic_error, "unknown sample method '"
                               << name
                               << "'; accepted: uniform, uniform_with_replacement (alias "
                                  "replacement), weighted");
}

std::vector<std::int32_t> block::coo_dst() const {
  std::vector<std::int32_t> out(src_index.size());
  for (std::int64_t i = 0; i < num_dst; ++i) {
    std::fill(out.begin() + offsets[i], out.begin() + offsets[i + 1], static_cast<std::int32_t>(i));
  }
  return out;
}

bool block::operator==(const block& o) const {
  return num_dst == o.num_dst && src_nodes == o.src_nodes && offsets == o.offsets &&
         src_index == o.src_index && edge_ids == o.edge_ids;
}

std::int64_t sample_result::num_sampled_edges() const {
  std::int64_t n = 0;
  for (const block& b : blocks) n += b.num_edges();
  return n;
}

namespace {

using detail::parallel_chunks;

// ---------------------------------------------------------------------------------------------
// Selection of one node's positions

/// Per-worker buffers, kept across nodes so the hot loop does not allocate.
struct scratch {
  std::vector<std::pair<double, std::int64_t>> race;
  std::vector<std::int64_t> set;
};

/// Above this fanout Floyd's membership test uses a hash set instead of the header's linear
/// scan (O(k) instead of O(k^2)); same draws and same set, so the same positions.
constexpr int linear_floyd_max = 64;

void select_uniform_large(std::uint64_t key, std::int64_t d, int k, std::int64_t* out, scratch& s) {
  std::size_t cap = 16;
  while (cap < 2 * static_cast<std::size_t>(k)) cap *= 2;
  s.set.assign(cap, -1);
  const std::size_t mask = cap - 1;
  // Inserts p; returns false when it was already there.
  auto insert = [&](std::int64_t p) {
    std::size_t h =
        static_cast<std::size_t>(static_cast<std::uint64_t>(p) * detail::golden_gamma >> 32) & mask;
    while (s.set[h] != -1) {
      if (s.set[h] == p) return false;
      h = (h + 1) & mask;
    }
    s.set[h] = p;
    return true;
  };
  for (int c = 0; c < k; ++c) {
    const std::int64_t j = d - k + c;
    const auto t = static_cast<std::int64_t>(detail::rand_below(
        detail::draw(key, static_cast<std::uint64_t>(c)), static_cast<std::uint64_t>(j + 1)));
    if (insert(t)) {
      out[c] = t;
    } else {
      insert(j);  // j is new: every earlier value is below it
      out[c] = j;
    }
  }
  std::sort(out, out + k);
}

/// Positions a node of degree d yields; weight_at(p) is the weight of its position p.
template <typename WeightAt>
std::int64_t sample_count(sample_method m, std::int64_t d, int fanout, const WeightAt& weight_at) {
  if (m != sample_method::weighted || fanout <= 0) return detail::max_sample_count(m, d, fanout);
  std::int64_t positive = 0;
  for (std::int64_t p = 0; p < d; ++p) positive += weight_at(p) > 0.0f ? 1 : 0;
  return std::min<std::int64_t>(positive, fanout);
}

/// Weighted without replacement: the `count` (from sample_count) positions of smallest race
/// time, ascending.
template <typename WeightAt>
void select_weighted(std::uint64_t key, std::int64_t d, int fanout, std::int64_t count,
                     const WeightAt& weight_at, std::int64_t* out, scratch& s) {
  if (fanout < 0) {
    for (std::int64_t p = 0; p < d; ++p) out[p] = p;
    return;
  }
  if (count == 0) return;
  if (count < fanout) {
    // Fewer positive weights than the fanout: all of them, no race needed.
    std::int64_t n = 0;
    for (std::int64_t p = 0; p < d; ++p) {
      if (weight_at(p) > 0.0f) out[n++] = p;
    }
    return;
  }
  // The `count` earliest entries so far in a heap whose top is the latest of them: the bar a
  // new edge must beat.  Edges that certainly lose skip the exact race time.
  auto before = [](const std::pair<double, std::int64_t>& a,
                   const std::pair<double, std::int64_t>& b) {
    return detail::race_before(a.first, a.second, b.first, b.second);
  };
  s.race.clear();
  const auto full = static_cast<std::size_t>(count);
  for (std::int64_t p = 0; p < d; ++p) {
    const float w = weight_at(p);
    if (!(w > 0.0f)) continue;
    const std::uint64_t x = detail::draw(key, static_cast<std::uint64_t>(p));
    if (s.race.size() == full && !detail::race_may_beat(x, w, s.race.front().first)) continue;
    const std::pair<double, std::int64_t> entry{detail::race_time_of_draw(x, w), p};
    if (s.race.size() < full) {
      s.race.push_back(entry);
      std::push_heap(s.race.begin(), s.race.end(), before);
    } else if (before(entry, s.race.front())) {
      std::pop_heap(s.race.begin(), s.race.end(), before);
      s.race.back() = entry;
      std::push_heap(s.race.begin(), s.race.end(), before);
    }
  }
  for (std::int64_t i = 0; i < count; ++i) out[i] = s.race[static_cast<std::size_t>(i)].second;
  std::sort(out, out + count);
}

/// Writes the `count` positions of one node to out.
template <typename WeightAt>
void select_positions(sample_method m, std::uint64_t key, std::int64_t d, int fanout,
                      std::int64_t count, const WeightAt& weight_at, std::int64_t* out,
                      scratch& s) {
  switch (m) {
    case sample_method::uniform:
      if (fanout > linear_floyd_max && d > fanout) {
        select_uniform_large(key, d, fanout, out, s);
      } else {
        detail::select_uniform(key, d, fanout, out);
      }
      return;
    case sample_method::uniform_with_replacement:
      detail::select_with_replacement(key, d, fanout, out);
      return;
    case sample_method::weighted:
      select_weighted(key, d, fanout, count, weight_at, out, s);
      return;
  }
}

// ---------------------------------------------------------------------------------------------
// Relabelling

/// Node id -> local index, open addressing with linear probing.  Empty slots hold key -1
/// (node ids are >= 0).  Grows by rehashing; load stays at most 1/2.
class node_map {
 public:
  /// Makes room for `n` entries in all.
  void reserve(std::size_t n) {
    std::size_t cap = slots_.empty() ? 64 : slots_.size();
    while (cap < 2 * n) cap *= 2;
    if (cap == slots_.size()) return;
    std::vector<slot> old(cap, slot{-1, 0});
    old.swap(slots_);
    set_bits(cap);
    for (const slot& s : old) {
      if (s.key < 0) continue;
      std::size_t h = home(s.key);
      while (slots_[h].key >= 0) h = (h + 1) & mask_;
      slots_[h] = s;
    }
  }

  void prefetch(std::int64_t key) const { __builtin_prefetch(&slots_[home(key)]); }

  /// The index of `key`, inserting it with index `next` when absent (inserted set to true).
  /// Needs a reserve() covering the insertion.
  std::int32_t find_or_insert(std::int64_t key, std::int32_t next, bool& inserted) {
    std::size_t h = home(key);
    for (;;) {
      slot& s = slots_[h];
      if (s.key == key) {
        inserted = false;
        return s.value;
      }
      if (s.key < 0) {
        s.key = key;
        s.value = next;
        inserted = true;
        return next;
      }
      h = (h + 1) & mask_;
    }
  }

 private:
  struct slot {
    std::int64_t key;
    std::int32_t value;
  };
  void set_bits(std::size_t cap) {
    int bits = 0;
    while ((std::size_t{1} << bits) < cap) ++bits;
    shift_ = 64 - bits;
    mask_ = cap - 1;
  }
  // Fibonacci hashing: consecutive ids land far apart.
  std::size_t home(std::int64_t key) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * detail::golden_gamma) >>
                                    shift_);
  }
  std::vector<slot> slots_;
  std::size_t mask_ = 0;
  int shift_ = 64;
};

/// Local index `index` must fit src_index's int32.
void check_local_index(std::size_t index) {
  WM_EXPECTS(index <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()),
             "sample_host: a block reached " << index + 1
                                             << " source nodes, more than src_index's int32 can "
                                                "address; sample smaller batches or fanouts");
}

// ---------------------------------------------------------------------------------------------
// Driving the hops

/// What a hop's fetch step hands to relabelling: per dst node offsets into the edge list, and
/// per edge its global edge id and neighbor id.
struct hop_edges {
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> edge_ids;
  std::vector<std::int64_t> neighbors;
};

/// Runs the hops: fetch(hop, fanout, dst nodes, hop_edges&) samples one hop; this relabels.
template <typename Fetch>
sample_result run_hops(const std::int64_t* seeds, std::size_t count, const sample_options& options,
                       const Fetch& fetch) {
  sample_result result;
  result.blocks.reserve(options.fanouts.size());
  node_map map;
  map.reserve(count);
  std::vector<std::int64_t> frontier;
  bool inserted = false;
  for (std::size_t i = 0; i < count; ++i) {
    check_local_index(frontier.size());
    map.find_or_insert(seeds[i], static_cast<std::int32_t>(frontier.size()), inserted);
    if (inserted) frontier.push_back(seeds[i]);
  }
  hop_edges hop;
  for (std::size_t h = 0; h < options.fanouts.size(); ++h) {
    fetch(static_cast<int>(h), options.fanouts[h], frontier, hop);
    block b;
    b.num_dst = static_cast<std::int64_t>(frontier.size());
    b.src_nodes = std::move(frontier);
    const std::size_t edges = hop.neighbors.size();
    map.reserve(b.src_nodes.size() + edges);
    b.src_index.resize(edges);
    // In order: first occurrence decides the local ids.  Prefetching the slot of an edge a few
    // steps ahead hides most of the cache misses of a large map.
    constexpr std::size_t ahead = 16;
    const std::int64_t* nb = hop.neighbors.data();
    for (std::size_t e = 0; e < edges; ++e) {
      if (e + ahead < edges) map.prefetch(nb[e + ahead]);
      const std::size_t next = b.src_nodes.size();
      std::int32_t idx = map.find_or_insert(nb[e],
                                            static_cast<std::int32_t>(std::min<std::size_t>(
                                                next, std::numeric_limits<std::int32_t>::max())),
                                            inserted);
      if (inserted) {
        check_local_index(next);
        b.src_nodes.push_back(nb[e]);
      }
      b.src_index[e] = idx;
    }
    b.offsets = std::move(hop.offsets);
    if (options.edge_ids) b.edge_ids = std::move(hop.edge_ids);
    if (h + 1 < options.fanouts.size()) frontier = b.src_nodes;
    result.blocks.push_back(std::move(b));
    hop = hop_edges{};
  }
  return result;
}

/// Per dst node: first edge, degree and sample count; then offsets.
struct frontier_rows {
  std::vector<std::int64_t> begin, degree, offsets;
  void resize(std::size_t n) {
    begin.resize(n);
    degree.resize(n);
    offsets.assign(n + 1, 0);
  }
  /// offsets[i + 1] holds node i's count on entry; prefix sums them.  Returns the total.
  std::int64_t prefix_sum() {
    for (std::size_t i = 1; i < offsets.size(); ++i) offsets[i] += offsets[i - 1];
    return offsets.back();
  }
};

constexpr std::size_t count_grain = 1024;
constexpr std::size_t fill_grain = 256;

/// Fills hop.edge_ids (global edge ids) from the per-node rows, counts done; weight_at(i, p)
/// is the weight of node i's position p.  Node i's draws are keyed by (random seed, hop, node):
/// options.random_seed, or item_seeds[i] when given (an owner serving other ranks' requests
/// draws with each requester's seed).
template <typename WeightAt>
void fill_edge_ids(const frontier_rows& rows, const std::vector<std::int64_t>& dst, int hop,
                   int fanout, const sample_options& options, const WeightAt& weight_at,
                   std::vector<scratch>& scratches, unsigned threads, hop_edges& out,
                   const std::vector<std::uint64_t>* item_seeds = nullptr) {
  out.edge_ids.resize(static_cast<std::size_t>(rows.offsets.back()));
  std::int64_t* ids = out.edge_ids.data();
  parallel_chunks(dst.size(), fill_grain, threads, [&](std::size_t b, std::size_t e, unsigned w) {
    for (std::size_t i = b; i < e; ++i) {
      const std::int64_t first = rows.offsets[i], n = rows.offsets[i + 1] - first;
      if (n == 0) continue;
      const std::uint64_t seed = item_seeds != nullptr ? (*item_seeds)[i] : options.random_seed;
      const std::uint64_t key = detail::node_key(seed, hop, dst[i]);
      select_positions(
          options.method, key, rows.degree[i], fanout, n,
          [&](std::int64_t p) { return weight_at(i, p); }, ids + first, scratches[w]);
      for (std::int64_t j = first; j < first + n; ++j) ids[j] += rows.begin[i];
    }
  });
}

// ---------------------------------------------------------------------------------------------
// A graph changed after its loader checked it (rule 6 of docs/dataset-format.md): the sampler
// checks every row and neighbor it reads, so that no bad value is ever used as an index.

/// Whether [first, end) is a row within the graph's edges.
bool row_in_bounds(std::int64_t first, std::int64_t end, std::uint64_t num_edges) {
  return first >= 0 && end >= first && static_cast<std::uint64_t>(end) <= num_edges;
}

std::string bad_row(std::int64_t v, std::int64_t first, std::int64_t end, std::uint64_t num_edges) {
  std::ostringstream os;
  os << "sample_host: the graph is corrupt: row_offsets[" << v << "] = " << first
     << " and row_offsets[" << v + 1 << "] = " << end
     << " are not a row within [0, num_edges = " << num_edges
     << "] (its memory was changed after loading?)";
  return os.str();
}

std::string bad_neighbor(std::int64_t edge, std::int64_t id, std::uint64_t num_nodes) {
  std::ostringstream os;
  os << "sample_host: the graph is corrupt: col_indices[" << edge << "] = " << id
     << " is outside [0, num_nodes = " << num_nodes << ") (its memory was changed after loading?)";
  return os.str();
}

/// The first fault a distributed sample met; the sample goes on with the bad row empty or the
/// bad neighbor replaced by node 0, so that every rank issues the same collectives, and all
/// throw at the end (throw_collectively).
class fault_record {
 public:
  void note(std::string message) {
    if (any_.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (message_.empty()) message_ = std::move(message);
    any_ = true;
  }
  /// Collective: throws logic_error on every rank when any rank noted a fault.
  void throw_collectively(wm::communicator& comm) const {
    std::vector<std::int64_t> flags(static_cast<std::size_t>(comm.size()), 0);
    flags[static_cast<std::size_t>(comm.rank())] = any_ ? 1 : 0;
    comm.allreduce_sum(flags.data(), flags.data(), flags.size(), wm::dtype::int64, nullptr);
    if (std::all_of(flags.begin(), flags.end(), [](std::int64_t f) { return f == 0; })) return;
    // Every rank knows there was a fault: all of them take part in sharing the messages.
    const std::vector<std::string> all = comm.get_bootstrap().allgatherv(message_);
    for (std::size_t r = 0; r < all.size(); ++r) {
      if (!all[r].empty()) {
        WM_FAIL(wm::logic_error, all[r] << (static_cast<int>(r) == comm.rank()
                                                ? std::string()
                                                : " (found by rank " + std::to_string(r) + ")"));
      }
    }
  }

 private:
  std::atomic<bool> any_{false};
  std::mutex mutex_;
  std::string message_;
};

// ---------------------------------------------------------------------------------------------
// Graphs read in place (continuous, chunked)

template <typename RowGen, typename ColGen, typename WeightGen>
sample_result sample_direct(const csr_graph& g, const RowGen& row, const ColGen& col,
                            const WeightGen& weight, const std::int64_t* seeds, std::size_t count,
                            const sample_options& options, unsigned threads) {
  std::vector<scratch> scratches(threads);
  frontier_rows rows;
  auto fetch = [&](int hop, int fanout, const std::vector<std::int64_t>& dst, hop_edges& out) {
    const std::size_t n = dst.size();
    rows.resize(n);
    parallel_chunks(n, count_grain, threads, [&](std::size_t b, std::size_t e, unsigned) {
      for (std::size_t i = b; i < e; ++i) {
        const std::int64_t first = *row.At(dst[i]);
        const std::int64_t end = *row.At(dst[i] + 1);
        if (!row_in_bounds(first, end, g.num_edges)) {
          WM_FAIL(wm::logic_error, bad_row(dst[i], first, end, g.num_edges));
        }
        const std::int64_t d = end - first;
        rows.begin[i] = first;
        rows.degree[i] = d;
        rows.offsets[i + 1] = sample_count(options.method, d, fanout,
                                           [&](std::int64_t p) { return *weight.At(first + p); });
      }
    });
    rows.prefix_sum();
    fill_edge_ids(
        rows, dst, hop, fanout, options,
        [&](std::size_t i, std::int64_t p) { return *weight.At(rows.begin[i] + p); }, scratches,
        threads, out);
    out.neighbors.resize(out.edge_ids.size());
    parallel_chunks(out.edge_ids.size(), 4096, threads,
                    [&](std::size_t b, std::size_t e, unsigned) {
                      for (std::size_t j = b; j < e; ++j) {
                        const auto id = static_cast<std::int64_t>(*col.At(out.edge_ids[j]));
                        if (static_cast<std::uint64_t>(id) >= g.num_nodes) {
                          WM_FAIL(wm::logic_error, bad_neighbor(out.edge_ids[j], id, g.num_nodes));
                        }
                        out.neighbors[j] = id;
                      }
                    });
    out.offsets = rows.offsets;
  };
  return run_hops(seeds, count, options, fetch);
}

template <typename ColT>
sample_result sample_continuous(const csr_graph& g, const std::int64_t* seeds, std::size_t count,
                                const sample_options& options, unsigned threads) {
  using wm::PtrGen;
  PtrGen<const std::int64_t, const std::int64_t> row(g.row_offsets.data());
  PtrGen<const ColT, const ColT> col(g.col_indices.data());
  PtrGen<const float, const float> weight(g.has_weights() ? g.edge_weights.data() : nullptr);
  return sample_direct(g, row, col, weight, seeds, count, options, threads);
}

template <typename ColT>
sample_result sample_chunked(const csr_graph& g, const std::int64_t* seeds, std::size_t count,
                             const sample_options& options, unsigned threads) {
  using wm::PtrGen;
  // The generators point at these views: they live for the whole call.
  const wm::chunked_view row_view = g.row_offsets.host_view();
  const wm::chunked_view col_view = g.col_indices.host_view();
  wm::chunked_view weight_view{};  // never read without weights
  if (g.has_weights()) weight_view = g.edge_weights.host_view();
  PtrGen<const wm::chunked_view, const std::int64_t> row(&row_view);
  PtrGen<const wm::chunked_view, const ColT> col(&col_view);
  PtrGen<const wm::chunked_view, const float> weight(&weight_view);
  return sample_direct(g, row, col, weight, seeds, count, options, threads);
}

// ---------------------------------------------------------------------------------------------
// Distributed graphs

wm::wm_tensor column_of(const wm::allocation& mem, wm::dtype type, std::size_t rows) {
  wm::wm_tensor t;
  t.memory = &mem;
  t.type = type;
  t.rows = rows;
  t.cols = 1;
  t.row_stride = 1;
  t.col_offset = 0;
  return t;
}

/// Collective: out[i] = table[idx[i]] converted to out_type.
void gather_column(const wm::wm_tensor& table, const std::vector<std::int64_t>& idx, void* out,
                   wm::dtype out_type, unsigned threads) {
  wm::index_array indices;
  indices.data = idx.data();
  indices.type = wm::dtype::int64;
  indices.count = idx.size();
  wm::dense_matrix dense;
  dense.data = out;
  dense.type = out_type;
  dense.rows = idx.size();
  dense.cols = 1;
  dense.row_stride = 1;
  wm::gather_host(table, indices, dense, threads);
}

// A rank's flags in the call's first collective: a bad seed, whether it asks for served hops
// (WHOLESTORE_SAMPLE_BY_OWNER unset or 1, as for the GPU sampler), an invalid setting.
constexpr std::int64_t flag_bad_seed = 1, flag_wants_owners = 2, flag_bad_setting = 4;

/// Every rank learns whether any rank has a seed outside the graph or an invalid
/// WHOLESTORE_SAMPLE_BY_OWNER, so that all of them throw instead of leaving the others waiting
/// in the next collective.  Returns whether every rank asks for served hops.
bool check_seeds_collectively(const csr_graph& g, const std::int64_t* seeds, std::size_t count) {
  wm::communicator& comm = g.row_offsets.comm();
  std::int64_t bad_pos = -1;
  for (std::size_t i = 0; i < count && bad_pos < 0; ++i) {
    if (seeds[i] < 0 || static_cast<std::uint64_t>(seeds[i]) >= g.num_nodes) {
      bad_pos = static_cast<std::int64_t>(i);
    }
  }
  const char* setting = std::getenv("WHOLESTORE_SAMPLE_BY_OWNER");
  const std::string value = setting != nullptr ? setting : "1";
  std::int64_t mine = bad_pos >= 0 ? flag_bad_seed : 0;
  if (value == "1") {
    mine |= flag_wants_owners;
  } else if (value != "0") {
    mine |= flag_bad_setting;
  }
  std::vector<std::int64_t> flags(static_cast<std::size_t>(comm.size()), 0);
  flags[static_cast<std::size_t>(comm.rank())] = mine;
  comm.allreduce_sum(flags.data(), flags.data(), flags.size(), wm::dtype::int64, nullptr);
  for (std::size_t r = 0; r < flags.size(); ++r) {
    WM_EXPECTS(
        (flags[r] & flag_bad_setting) == 0,
        "WHOLESTORE_SAMPLE_BY_OWNER must be 0 or 1; rank "
            << r << " has another value"
            << ((mine & flag_bad_setting) != 0 ? " (here: '" + value + "')" : std::string()));
  }
  WM_EXPECTS(bad_pos < 0, "sample_host: seed " << seeds[bad_pos] << " at position " << bad_pos
                                               << " is outside the graph's " << g.num_nodes
                                               << " nodes");
  for (std::size_t r = 0; r < flags.size(); ++r) {
    WM_EXPECTS((flags[r] & flag_bad_seed) == 0, "sample_host: rank "
                                                    << r << " passed a seed outside the graph's "
                                                    << g.num_nodes << " nodes");
  }
  return std::all_of(flags.begin(), flags.end(),
                     [](std::int64_t f) { return (f & flag_wants_owners) != 0; });
}

sample_result sample_distributed(const csr_graph& g, const std::int64_t* seeds, std::size_t count,
                                 const sample_options& options, unsigned threads) {
  wm::communicator& comm = g.row_offsets.comm();
  // Every rank reaches the same verdict: the flags and the layout check are collective.
  const bool served = check_seeds_collectively(g, seeds, count) &&
                      comm.get_backend() == wm::backend::host && edges_follow_nodes(g);
  const wm::wm_tensor row_table =
      column_of(g.row_offsets, wm::dtype::int64, static_cast<std::size_t>(g.num_nodes) + 1);
  const wm::wm_tensor col_table =
      column_of(g.col_indices, g.col_type, static_cast<std::size_t>(g.num_edges));
  wm::wm_tensor weight_table;
  if (g.has_weights()) {
    weight_table = column_of(g.edge_weights, wm::dtype::float32, g.num_edges);
  }
  std::vector<scratch> scratches(threads);
  frontier_rows rows;
  fault_record faults;
  std::vector<std::int64_t> idx, fetched;
  std::vector<std::int64_t> weight_first;  // per node, its first weight in `weights`
  std::vector<float> weights;
  // Per hop, on every rank, even with no dst nodes: gather row_offsets; for weighted hops with
  // a positive fanout gather the weights of every frontier edge; gather col_indices.  The
  // fanouts and the method agree across ranks, so the sequence does too.
  auto fetch = [&](int hop, int fanout, const std::vector<std::int64_t>& dst, hop_edges& out) {
    const std::size_t n = dst.size();
    rows.resize(n);
    idx.resize(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      idx[2 * i] = dst[i];
      idx[2 * i + 1] = dst[i] + 1;
    }
    fetched.resize(2 * n);
    gather_column(row_table, idx, fetched.data(), wm::dtype::int64, threads);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t first = fetched[2 * i], end = fetched[2 * i + 1];
      if (row_in_bounds(first, end, g.num_edges)) {
        rows.begin[i] = first;
        rows.degree[i] = end - first;
      } else {
        faults.note(bad_row(dst[i], first, end, g.num_edges));
        rows.begin[i] = 0;
        rows.degree[i] = 0;
      }
    }
    const bool need_weights = options.method == sample_method::weighted && fanout > 0;
    if (need_weights) {
      weight_first.assign(n + 1, 0);
      for (std::size_t i = 0; i < n; ++i) weight_first[i + 1] = weight_first[i] + rows.degree[i];
      idx.resize(static_cast<std::size_t>(weight_first[n]));
      for (std::size_t i = 0; i < n; ++i) {
        for (std::int64_t p = 0; p < rows.degree[i]; ++p)
          idx[weight_first[i] + p] = rows.begin[i] + p;
      }
      weights.resize(idx.size());
      gather_column(weight_table, idx, weights.data(), wm::dtype::float32, threads);
    }
    auto weight_at = [&](std::size_t i, std::int64_t p) {
      return weights[static_cast<std::size_t>(weight_first[i] + p)];
    };
    parallel_chunks(n, count_grain, threads, [&](std::size_t b, std::size_t e, unsigned) {
      for (std::size_t i = b; i < e; ++i) {
        rows.offsets[i + 1] = sample_count(options.method, rows.degree[i], fanout,
                                           [&](std::int64_t p) { return weight_at(i, p); });
      }
    });
    rows.prefix_sum();
    fill_edge_ids(rows, dst, hop, fanout, options, weight_at, scratches, threads, out);
    out.neighbors.resize(out.edge_ids.size());
    gather_column(col_table, out.edge_ids, out.neighbors.data(), wm::dtype::int64, threads);
    for (std::size_t j = 0; j < out.neighbors.size(); ++j) {
      if (static_cast<std::uint64_t>(out.neighbors[j]) >= g.num_nodes) {
        faults.note(bad_neighbor(out.edge_ids[j], out.neighbors[j], g.num_nodes));
        out.neighbors[j] = 0;
      }
    }
    out.offsets = rows.offsets;
  };
  if (!served) {
    sample_result result = run_hops(seeds, count, options, fetch);
    faults.throw_collectively(comm);
    return result;
  }
  const detail::own_parts own(g);
  const auto R = static_cast<std::size_t>(own.ranks);
  const auto num_nodes = static_cast<std::int64_t>(g.num_nodes);
  std::vector<std::int64_t> ids, positions, requests, reply, back;
  std::vector<std::uint64_t> request_seeds;
  hop_edges asked;
  // A served hop: the dst nodes bucketed by owner; the counts, then the nodes, to the owners;
  // each owner samples what it was asked from its own parts and replies to each rank with the
  // counts, the neighbors and (when asked for) the edge ids of its requests, sized by an
  // exchange of reply sizes; the neighbors land at their nodes.
  int served_hops = 0;
  auto serve = [&](int hop, int fanout, const std::vector<std::int64_t>& dst, hop_edges& out) {
    if (fanout < 0) {
      fetch(hop, fanout, dst, out);
      return;
    }
    ++served_hops;
    const std::size_t n = dst.size();
    std::vector<std::size_t> send(R, 0), send_displs(R, 0), recv(R, 0), recv_displs(R, 0);
    std::vector<int> owner(n);
    for (std::size_t i = 0; i < n; ++i) {
      owner[i] = own.owner_of(dst[i]);
      ++send[static_cast<std::size_t>(owner[i])];
    }
    for (std::size_t r = 1; r < R; ++r) send_displs[r] = send_displs[r - 1] + send[r - 1];
    ids.resize(n);
    positions.resize(n);
    std::vector<std::size_t> cursor = send_displs;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t slot = cursor[static_cast<std::size_t>(owner[i])]++;
      ids[slot] = dst[i];
      positions[slot] = static_cast<std::int64_t>(i);
    }
    // The counts, each with the requester's random seed: the owner draws a node's sample with
    // the seed of the rank that asked, so the sample is the one that rank would draw itself.
    std::vector<std::int64_t> sent(2 * R), got(2 * R);
    for (std::size_t r = 0; r < R; ++r) {
      sent[2 * r] = static_cast<std::int64_t>(send[r]);
      sent[2 * r + 1] = static_cast<std::int64_t>(options.random_seed);
    }
    std::vector<std::size_t> twos(R, 2), each(R);
    for (std::size_t r = 0; r < R; ++r) each[r] = 2 * r;
    detail::exchange(comm, sent.data(), twos, each, got.data(), twos, each);
    for (std::size_t r = 0; r < R; ++r) recv[r] = static_cast<std::size_t>(got[2 * r]);
    for (std::size_t r = 1; r < R; ++r) recv_displs[r] = recv_displs[r - 1] + recv[r - 1];
    const std::size_t m = recv_displs[R - 1] + recv[R - 1];
    request_seeds.resize(m);
    for (std::size_t r = 0; r < R; ++r) {
      std::fill_n(request_seeds.begin() + static_cast<std::ptrdiff_t>(recv_displs[r]), recv[r],
                  static_cast<std::uint64_t>(got[2 * r + 1]));
    }
    requests.resize(m);
    detail::exchange(comm, ids.data(), send, send_displs, requests.data(), recv, recv_displs);

    // The owner's side: steps 1-3 of the hop on its own rows.
    rows.resize(m);
    parallel_chunks(m, count_grain, threads, [&](std::size_t b, std::size_t e, unsigned) {
      for (std::size_t i = b; i < e; ++i) {
        std::int64_t first = 0, end = 0;
        if (!own.row(requests[i], first, end)) {
          faults.note(bad_row(requests[i], first, end, g.num_edges));
          first = own.edge_begin;
          end = own.edge_begin;
        }
        rows.begin[i] = first;
        rows.degree[i] = end - first;
        rows.offsets[i + 1] = sample_count(options.method, end - first, fanout,
                                           [&](std::int64_t p) { return own.weight(first + p); });
      }
    });
    rows.prefix_sum();
    fill_edge_ids(
        rows, requests, hop, fanout, options,
        [&](std::size_t i, std::int64_t p) { return own.weight(rows.begin[i] + p); }, scratches,
        threads, asked, &request_seeds);
    // Rank r's reply: the counts of its requests, then their neighbors in request order, then
    // (when asked for) their edge ids: exactly what was drawn, no padding.
    const std::size_t per_edge = options.edge_ids ? 2 : 1;
    std::vector<std::size_t> out_words(R), out_displs(R, 0), in_words(R), in_displs(R, 0);
    for (std::size_t r = 0; r < R; ++r) {
      const std::size_t lo = recv_displs[r], hi = lo + recv[r];
      const auto drawn = static_cast<std::size_t>(rows.offsets[hi] - rows.offsets[lo]);
      out_words[r] = recv[r] + per_edge * drawn;
      if (r > 0) out_displs[r] = out_displs[r - 1] + out_words[r - 1];
    }
    reply.resize(out_displs[R - 1] + out_words[R - 1]);
    for (std::size_t r = 0; r < R; ++r) {
      const std::size_t lo = recv_displs[r];
      std::int64_t* counts = reply.data() + out_displs[r];
      for (std::size_t j = 0; j < recv[r]; ++j)
        counts[j] = rows.offsets[lo + j + 1] - rows.offsets[lo + j];
    }
    // The neighbors, read from the own columns in chunks of requests.
    parallel_chunks(m, fill_grain, threads, [&](std::size_t b, std::size_t e, unsigned) {
      for (std::size_t i = b; i < e; ++i) {
        const auto r = static_cast<std::size_t>(
            std::upper_bound(recv_displs.begin(), recv_displs.end(), i) - recv_displs.begin() - 1);
        const std::int64_t base = rows.offsets[recv_displs[r]];
        const std::size_t drawn = (out_words[r] - recv[r]) / per_edge;
        std::int64_t* nb = reply.data() + out_displs[r] + recv[r];
        for (std::int64_t x = rows.offsets[i]; x < rows.offsets[i + 1]; ++x) {
          const std::int64_t edge = asked.edge_ids[static_cast<std::size_t>(x)];
          std::int64_t id = own.column(edge);
          if (id < 0 || id >= num_nodes) {
            faults.note(bad_neighbor(edge, id, g.num_nodes));
            id = 0;
          }
          nb[x - base] = id;
          if (options.edge_ids) nb[drawn + static_cast<std::size_t>(x - base)] = edge;
        }
      }
    });

    // The sizes, then the replies back; each record's neighbors land at its node.
    std::vector<std::int64_t> sizes_out(out_words.begin(), out_words.end()), sizes_in(R);
    std::vector<std::size_t> ones(R, 1), each_one(R);
    for (std::size_t r = 0; r < R; ++r) each_one[r] = r;
    detail::exchange(comm, sizes_out.data(), ones, each_one, sizes_in.data(), ones, each_one);
    for (std::size_t r = 0; r < R; ++r) {
      in_words[r] = static_cast<std::size_t>(sizes_in[r]);
      if (r > 0) in_displs[r] = in_displs[r - 1] + in_words[r - 1];
    }
    back.resize(in_displs[R - 1] + in_words[R - 1]);
    detail::exchange(comm, reply.data(), out_words, out_displs, back.data(), in_words, in_displs);
    out.offsets.assign(n + 1, 0);
    for (std::size_t o = 0; o < R; ++o) {
      const std::int64_t* counts = back.data() + in_displs[o];
      for (std::size_t j = 0; j < send[o]; ++j)
        out.offsets[static_cast<std::size_t>(positions[send_displs[o] + j]) + 1] = counts[j];
    }
    for (std::size_t i = 1; i <= n; ++i) out.offsets[i] += out.offsets[i - 1];
    const auto edges = static_cast<std::size_t>(out.offsets[n]);
    out.neighbors.resize(edges);
    out.edge_ids.resize(options.edge_ids ? edges : 0);
    for (std::size_t o = 0; o < R; ++o) {
      const std::int64_t* counts = back.data() + in_displs[o];
      const std::int64_t* nb = counts + send[o];
      const std::size_t drawn = (in_words[o] - send[o]) / per_edge;
      std::size_t at = 0;
      for (std::size_t j = 0; j < send[o]; ++j) {
        const auto c = static_cast<std::size_t>(counts[j]);
        const auto to = static_cast<std::ptrdiff_t>(
            out.offsets[static_cast<std::size_t>(positions[send_displs[o] + j])]);
        std::copy(nb + at, nb + at + c, out.neighbors.begin() + to);
        if (options.edge_ids)
          std::copy(nb + drawn + at, nb + drawn + at + c, out.edge_ids.begin() + to);
        at += c;
      }
    }
  };
  sample_result result = run_hops(seeds, count, options, serve);
  faults.throw_collectively(comm);
  result.served_hops = served_hops;
  return result;
}

}  // namespace

sample_result sample_host(const csr_graph& graph, const std::int64_t* seeds, std::size_t count,
                          const sample_options& options, unsigned threads) {
  WM_EXPECTS(static_cast<bool>(graph.row_offsets),
             "sample_host: the graph has no row offsets (an empty csr_graph)");
  WM_EXPECTS(graph.location() == wm::memory_location::host,
             "sample_host samples host-location graphs; this graph is in device memory: use "
             "gpu_sampler");
  WM_EXPECTS(!options.fanouts.empty(), "sample_host: no fanouts (one per hop is needed)");
  for (std::size_t h = 0; h < options.fanouts.size(); ++h) {
    WM_EXPECTS(options.fanouts[h] >= -1, "sample_host: fanout " << options.fanouts[h] << " of hop "
                                                                << h
                                                                << " is below -1 (-1 takes all "
                                                                   "neighbors, 0 none)");
  }
  WM_EXPECTS(options.method != sample_method::weighted || graph.has_weights(),
             "sample_host: weighted sampling needs edge weights; this graph has none");
  WM_EXPECTS(count == 0 || seeds != nullptr,
             "sample_host: " << count << " seeds at a null address");
  threads = std::max(threads, 1u);

  if (graph.type() == wm::memory_type::distributed) {
    return sample_distributed(graph, seeds, count, options, threads);
  }
  for (std::size_t i = 0; i < count; ++i) {
    WM_EXPECTS(seeds[i] >= 0 && static_cast<std::uint64_t>(seeds[i]) < graph.num_nodes,
               "sample_host: seed " << seeds[i] << " at position " << i
                                    << " is outside the graph's " << graph.num_nodes << " nodes");
  }
  const bool narrow = graph.col_type == wm::dtype::int32;
  WM_EXPECTS(
      narrow || graph.col_type == wm::dtype::int64,
      "sample_host: col_indices must be int32 or int64, not " << wm::dtype_name(graph.col_type));
  if (graph.type() == wm::memory_type::continuous) {
    return narrow ? sample_continuous<std::int32_t>(graph, seeds, count, options, threads)
                  : sample_continuous<std::int64_t>(graph, seeds, count, options, threads);
  }
  return narrow ? sample_chunked<std::int32_t>(graph, seeds, count, options, threads)
                : sample_chunked<std::int64_t>(graph, seeds, count, options, threads);
}

}  // namespace wholestore::graph
