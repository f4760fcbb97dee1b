// random_walks_host: walks split over threads in dynamically taken chunks (walk lengths vary
// with dead ends and node2vec's rejections); every walk writes only its own row, so any thread
// count gives the same output.  Also the option checks both paths share.  Distributed graphs:
// walks_distributed_host.cpp.
#include "walks_common.hpp"

#include <graph/detail/walk_step.hpp>
#include <graph/walks.hpp>
#include <wholememory/communicator.hpp>
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

/// The walks of [begin, end), `lanes` of them interleaved on this thread.  A step is
/// dependent random reads (the current node's row offsets, then a candidate neighbor, for
/// node2vec maybe several), each a cache miss on a large graph; one walk at a time waits for
/// every one.  Here each lane issues a prefetch for its next read and hands over to the next
/// lane, so a thread has `lanes` reads in flight.  The draws and decisions are walk_step's
/// (detail/walk_step.hpp) in the same order, so the walks are the same bits.
template <typename Row, typename Col>
void walk_range(const csr_graph& g, const Row& row, const Col& col, const std::int64_t* starts,
                std::size_t begin, std::size_t end, const walk_options& o,
                const detail::walk_rule& r, std::int64_t* out, std::atomic<bool>& fault) {
  constexpr int lanes = 16;
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  struct lane {
    std::int64_t* w = nullptr;  // the walk's output row; null: the lane is idle
    std::uint64_t key = 0;
    std::size_t s = 0;  // the next position of w to write
    std::int64_t prev = -1, cur = 0;
    std::int64_t first = 0, degree = 0;  // cur's row, once read
    std::int64_t pfirst = 0, pend = 0;   // prev's row (second order)
    std::int64_t edge = -1;              // the candidate's edge; -1: cur's row is to be read
    std::uint32_t trial = 0;
  };
  lane ln[lanes];
  std::size_t next_walk = begin;
  // Starts walk next_walk in lane l (or leaves it idle when none is left).
  auto start = [&](lane& l) {
    while (next_walk < end) {
      const std::size_t i = next_walk++;
      l.w = out + i * width;
      l.key = detail::walk_key(o.seed, o.first_walk + i, starts[i]);
      l.prev = -1;
      l.cur = starts[i];
      l.w[0] = l.cur;
      l.s = 1;
      l.edge = -1;
      if (l.s < width) {
        __builtin_prefetch(row.At(l.cur));
        return;
      }
    }
    l.w = nullptr;
  };
  auto finish = [&](lane& l) {
    std::fill(l.w + l.s, l.w + width, std::int64_t{-1});
    start(l);
  };
  auto fail = [&](lane& l) {
    fault.store(true, std::memory_order_relaxed);
    finish(l);
  };
  auto advance = [&](lane& l, std::int64_t v) {
    l.w[l.s++] = v;
    l.prev = l.cur;
    l.cur = v;
    l.edge = -1;
    if (l.s == width) {
      finish(l);
    } else {
      __builtin_prefetch(row.At(v));
    }
  };
  // walk_step's counter of trial t at the current step: s * 2^32 + 2t.
  auto counter = [](const lane& l) {
    return (static_cast<std::uint64_t>(l.s - 1) << 32) + 2 * std::uint64_t{l.trial};
  };
  // The candidate edge of the current trial, its read requested.
  auto choose = [&](lane& l) {
    l.edge = l.first + static_cast<std::int64_t>(detail::rand_below(
                           detail::draw(l.key, counter(l)), static_cast<std::uint64_t>(l.degree)));
    __builtin_prefetch(col.At(l.edge));
  };
  const double lo = std::min(r.neighbor_ratio, r.away_ratio);
  const double hi = std::max(r.neighbor_ratio, r.away_ratio);
  for (lane& l : ln) start(l);
  for (bool busy = true; busy;) {
    busy = false;
    for (lane& l : ln) {
      if (l.w == nullptr) continue;
      busy = true;
      const bool second = r.second_order && l.prev >= 0;
      if (l.edge < 0) {
        const std::int64_t first = *row.At(l.cur), last = *row.At(l.cur + 1);
        if (first < 0 || last < first || static_cast<std::uint64_t>(last) > g.num_edges) {
          fail(l);
          continue;
        }
        if (last == first) {
          finish(l);  // a dead end
          continue;
        }
        l.first = first;
        l.degree = last - first;
        if (second) {
          l.pfirst = *row.At(l.prev);
          l.pend = *row.At(l.prev + 1);
          if (l.pfirst < 0 || l.pend < l.pfirst ||
              static_cast<std::uint64_t>(l.pend) > g.num_edges) {
            fail(l);
            continue;
          }
        }
        l.trial = 0;
        choose(l);
        continue;
      }
      const auto v = static_cast<std::int64_t>(*col.At(l.edge));
      if (v < 0 || static_cast<std::uint64_t>(v) >= g.num_nodes) {
        fail(l);
        continue;
      }
      if (!second) {
        advance(l, v);
        continue;
      }
      const double u = static_cast<double>(detail::draw(l.key, counter(l) + 1) >> 11) * 0x1.0p-53;
      bool accept = false;
      if (v == l.prev) {
        accept = u < r.back_ratio;
      } else if (u < lo) {
        accept = true;
      } else if (u < hi) {
        const bool near = detail::scan_neighbors{}(col, l.prev, l.pfirst, l.pend, v);
        accept = u < (near ? r.neighbor_ratio : r.away_ratio);
      }
      if (accept || ++l.trial == detail::max_walk_trials) {
        advance(l, v);  // after max_walk_trials rejections the last candidate is taken
      } else {
        choose(l);
      }
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
      walk_range(g, row, col, starts, b, e, o, rule, out, fault);
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
  if (graph.type() == wm::memory_type::distributed) {
    detail::walk_distributed_host(
        graph, starts, count, options, out,
        threads == 0 ? std::max(1u, std::thread::hardware_concurrency()) : threads);
    return;
  }
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
