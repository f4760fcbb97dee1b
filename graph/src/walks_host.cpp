// random_walks_host: walks split over threads in dynamically taken chunks (walk lengths vary
// with dead ends and node2vec's rejections); every walk writes only its own row, so any thread
// count gives the same output.  Also the option checks both paths share.
#include "walks_common.hpp"

#include <graph/detail/walk_step.hpp>
#include <graph/walks.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <sstream>
#include <thread>
#include <vector>

namespace wholestore::graph {

namespace wm = wholememory;

namespace detail {

void check_walk_call(const csr_graph& graph, std::size_t count, const walk_options& o,
                     const void* starts, const void* out, const char* op) {
  WM_EXPECTS(static_cast<bool>(graph.row_offsets), op << ": an empty graph");
  WM_EXPECTS(graph.type() != wm::memory_type::distributed,
             op << ": the graph is in distributed memory, where a walk's next node can be on any "
                   "rank; random walks need continuous or chunked memory");
  WM_EXPECTS(o.length >= 0, op << ": walk length " << o.length << " is negative");
  WM_EXPECTS(std::isfinite(o.p) && o.p > 0 && std::isfinite(o.q) && o.q > 0,
             op << ": node2vec p and q must be finite and > 0, got p = " << o.p << ", q = " << o.q);
  WM_EXPECTS(count == 0 || (starts != nullptr && out != nullptr),
             op << ": " << count << " walks with a null start or output array");
}

std::string corrupt_graph_message(const char* op) {
  return std::string(op) +
         ": the graph is corrupt: a row offset or neighbor id outside the graph was met "
         "(its memory was changed after loading?)";
}

}  // namespace detail

namespace {

template <typename Row, typename Col>
void walk_range(const csr_graph& g, const Row& row, const Col& col, const std::int64_t* starts,
                std::size_t begin, std::size_t end, const walk_options& o,
                const detail::walk_rule& rule, std::int64_t* out, std::atomic<bool>& fault) {
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  for (std::size_t i = begin; i < end; ++i) {
    std::int64_t* w = out + i * width;
    const std::uint64_t key = detail::walk_key(o.seed, o.first_walk + i, starts[i]);
    std::int64_t prev = -1, cur = starts[i];
    w[0] = cur;
    std::size_t s = 1;
    for (; s < width; ++s) {
      const std::int64_t next = detail::walk_step(rule, key, static_cast<std::uint32_t>(s - 1),
                                                  prev, cur, row, col, g.num_nodes, g.num_edges);
      if (next == detail::walk_fault) fault.store(true, std::memory_order_relaxed);
      if (next < 0) break;
      w[s] = next;
      prev = cur;
      cur = next;
    }
    std::fill(w + s, w + width, std::int64_t{-1});
  }
}

/// First-order walks (DeepWalk) of [begin, end), `lanes` of them interleaved on this thread.
/// A step is two dependent random reads (the current node's row offsets, then the chosen
/// neighbor), each a cache miss on a large graph; one walk at a time waits for both.  Here
/// every lane issues a prefetch for its next read and hands over to the next lane, so a
/// thread has `lanes` reads in flight.  The draws are walk_step's (detail/walk_step.hpp):
/// position rand_below(draw(key, s * 2^32), degree) of the current row, the same checks, the
/// same walks bit for bit.
template <typename Row, typename Col>
void walk_range_first_order(const csr_graph& g, const Row& row, const Col& col,
                            const std::int64_t* starts, std::size_t begin, std::size_t end,
                            const walk_options& o, std::int64_t* out, std::atomic<bool>& fault) {
  constexpr int lanes = 16;
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  struct lane {
    std::int64_t* w = nullptr;  // the walk's output row; null: the lane is idle
    std::uint64_t key = 0;
    std::size_t s = 0;  // the next position of w to write
    std::int64_t cur = 0;
    std::int64_t edge = -1;  // the chosen edge, or -1 while the row is to be read
  };
  lane ln[lanes];
  std::size_t next_walk = begin;
  // Starts walk next_walk in lane l (or leaves it idle when none is left); false when idle.
  auto start = [&](lane& l) {
    while (next_walk < end) {
      const std::size_t i = next_walk++;
      l.w = out + i * width;
      l.key = detail::walk_key(o.seed, o.first_walk + i, starts[i]);
      l.cur = starts[i];
      l.w[0] = l.cur;
      l.s = 1;
      l.edge = -1;
      if (l.s < width) {
        __builtin_prefetch(row.At(l.cur));
        return true;
      }
    }
    l.w = nullptr;
    return false;
  };
  auto finish = [&](lane& l) {
    std::fill(l.w + l.s, l.w + width, std::int64_t{-1});
    start(l);
  };
  int active = 0;
  for (lane& l : ln) active += start(l) ? 1 : 0;
  while (active > 0) {
    active = 0;
    for (lane& l : ln) {
      if (l.w == nullptr) continue;
      if (l.edge < 0) {
        const std::int64_t first = *row.At(l.cur), last = *row.At(l.cur + 1);
        if (first < 0 || last < first || static_cast<std::uint64_t>(last) > g.num_edges) {
          fault.store(true, std::memory_order_relaxed);
          finish(l);
        } else if (last == first) {
          finish(l);  // a dead end
        } else {
          const std::uint64_t x = detail::draw(l.key, static_cast<std::uint64_t>(l.s - 1) << 32);
          l.edge = first + static_cast<std::int64_t>(
                               detail::rand_below(x, static_cast<std::uint64_t>(last - first)));
          __builtin_prefetch(col.At(l.edge));
        }
      } else {
        const auto v = static_cast<std::int64_t>(*col.At(l.edge));
        l.edge = -1;
        if (v < 0 || static_cast<std::uint64_t>(v) >= g.num_nodes) {
          fault.store(true, std::memory_order_relaxed);
          finish(l);
        } else {
          l.w[l.s++] = v;
          l.cur = v;
          if (l.s == width) {
            finish(l);
          } else {
            __builtin_prefetch(row.At(v));
          }
        }
      }
      active += l.w != nullptr ? 1 : 0;
    }
  }
}

template <typename Row, typename ColGen>
void walk_all(const csr_graph& g, const Row& row, const ColGen& col, const std::int64_t* starts,
              std::size_t count, const walk_options& o, std::int64_t* out, unsigned threads) {
  const detail::walk_rule rule = detail::make_walk_rule(o.p, o.q);
  std::atomic<bool> fault{false};
  constexpr std::size_t grain = 256;
  const std::size_t chunks = (count + grain - 1) / grain;
  const unsigned t = static_cast<unsigned>(std::min<std::size_t>(std::max(threads, 1u), chunks));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t c; (c = next.fetch_add(1)) < chunks;) {
      const std::size_t b = c * grain, e = std::min(count, (c + 1) * grain);
      if (rule.second_order) {
        walk_range(g, row, col, starts, b, e, o, rule, out, fault);
      } else {
        walk_range_first_order(g, row, col, starts, b, e, o, out, fault);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < t; ++k) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  if (fault.load()) WM_FAIL(wm::logic_error, detail::corrupt_graph_message("random_walks_host"));
}

template <typename ColT>
void walk_typed(const csr_graph& g, const std::int64_t* starts, std::size_t count,
                const walk_options& o, std::int64_t* out, unsigned threads) {
  if (g.type() == wm::memory_type::continuous) {
    wm::PtrGen<const std::int64_t, const std::int64_t> row(
        static_cast<const std::int64_t*>(g.row_offsets.data()));
    wm::PtrGen<const ColT, const ColT> col(static_cast<const ColT*>(g.col_indices.data()));
    walk_all(g, row, col, starts, count, o, out, threads);
  } else {
    const wm::chunked_view row_view = g.row_offsets.host_view();
    const wm::chunked_view col_view = g.col_indices.host_view();
    wm::PtrGen<const wm::chunked_view, const std::int64_t> row(&row_view);
    wm::PtrGen<const wm::chunked_view, const ColT> col(&col_view);
    walk_all(g, row, col, starts, count, o, out, threads);
  }
}

}  // namespace

void random_walks_host(const csr_graph& graph, const std::int64_t* starts, std::size_t count,
                       const walk_options& options, std::int64_t* out, unsigned threads) {
  const char* op = "random_walks_host";
  detail::check_walk_call(graph, count, options, starts, out, op);
  WM_EXPECTS(graph.location() == wm::memory_location::host,
             op << " walks host-location graphs; this graph is in device memory: use gpu_walker");
  for (std::size_t i = 0; i < count; ++i) {
    WM_EXPECTS(starts[i] >= 0 && static_cast<std::uint64_t>(starts[i]) < graph.num_nodes,
               op << ": start node " << starts[i] << " at position " << i
                  << " is outside the graph of " << graph.num_nodes << " nodes");
  }
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  if (graph.col_type == wm::dtype::int32) {
    walk_typed<std::int32_t>(graph, starts, count, options, out, threads);
  } else {
    walk_typed<std::int64_t>(graph, starts, count, options, out, threads);
  }
}

}  // namespace wholestore::graph
