/*
 * One step of a random walk, shared by the CPU path and the CUDA kernel so that both give the
 * same walks bit for bit.  Internal.
 *
 * A walk's draws are a SplitMix64 stream keyed by walk_key(seed, walk index, start node), so a
 * walk depends only on (graph, start, walk index, seed), never on the thread, rank or batch.
 * Step s (s = 0 is the move from the start) uses counters s * 2^32 + c:
 *  - first order (DeepWalk, or node2vec with p = q = 1), and node2vec's first step: the next
 *    node is position rand_below(draw(key, s * 2^32), degree) of the current node's list.
 *  - node2vec, later steps, by rejection: trial t draws a candidate position from
 *    draw(key, s * 2^32 + 2t) and accepts it when (draw(key, s * 2^32 + 2t + 1) >> 11) * 2^-53
 *    < ratio, where ratio = alpha / max(1/p, 1, 1/q) with alpha = 1/p for stepping back to the
 *    previous node, 1 for a neighbor of the previous node, 1/q otherwise.  Accepted candidates
 *    are distributed exactly as node2vec's transition probabilities.  After max_walk_trials
 *    rejections the last candidate is taken (reached only when 1/p or 1/q is under
 *    ~1e-4 of the others).  Neighborship is looked up in the previous node's list, only when
 *    the acceptance draw falls between the neighbor and away ratios (elsewhere both decide
 *    alike): with p = 0.5, q = 2 a quarter of the trials look.  The lookup is a scan, or what
 *    the caller passes (the GPU walker: a binary search in a sorted copy of a hub's list);
 *    membership is membership, so every lookup gives the same walks.
 * A node without out-neighbors ends the walk: the rest of its row is -1.
 */
#pragma once

#include <graph/detail/sample_select.hpp>
#include <wholememory/host_device.hpp>

#include <cstdint>

namespace wholestore::graph::detail {

constexpr std::uint32_t max_walk_trials = 1u << 16;

/// The acceptance ratios of a walk (first order: every ratio 1), computed once on the host.
struct walk_rule {
  bool second_order = false;
  double back_ratio = 1.0;      ///< candidate == previous node
  double neighbor_ratio = 1.0;  ///< candidate is a neighbor of the previous node
  double away_ratio = 1.0;      ///< any other candidate
};

inline walk_rule make_walk_rule(double p, double q) {
  walk_rule r;
  r.second_order = !(p == 1.0 && q == 1.0);
  if (!r.second_order) return r;
  const double back = 1.0 / p, away = 1.0 / q;
  double top = back > 1.0 ? back : 1.0;
  if (away > top) top = away;
  r.back_ratio = back / top;
  r.neighbor_ratio = 1.0 / top;
  r.away_ratio = away / top;
  return r;
}

WM_HOST_DEVICE std::uint64_t walk_key(std::uint64_t seed, std::uint64_t walk_index,
                                      std::int64_t start) {
  return mix64(mix64(mix64(seed ^ 0x5bd1e9955bd1e995ull) ^ walk_index) ^
               static_cast<std::uint64_t>(start));
}

/// Results of walk_step below 0.
constexpr std::int64_t walk_dead_end = -1;
constexpr std::int64_t walk_fault = -2;  ///< a row or neighbor outside the graph

/// Whether v is among the neighbors col[first, end) of a node: a scan.
struct scan_neighbors {
  template <typename Col>
  WM_HOST_DEVICE bool operator()(const Col& col, std::int64_t /*node*/, std::int64_t first,
                                 std::int64_t end, std::int64_t v) const {
    for (std::int64_t e = first; e < end; ++e)
      if (static_cast<std::int64_t>(*col.At(e)) == v) return true;
    return false;
  }
};

/// The node after `cur` (reached from `prev`, -1 at the start) at step `step`.  Row: PtrGen
/// over int64 row offsets; Col: over the neighbor ids; Member: the neighborship lookup
/// (scan_neighbors' signature).
template <typename Row, typename Col, typename Member = scan_neighbors>
WM_HOST_DEVICE std::int64_t walk_step(const walk_rule& r, std::uint64_t key, std::uint32_t step,
                                      std::int64_t prev, std::int64_t cur, const Row& row,
                                      const Col& col, std::uint64_t num_nodes,
                                      std::uint64_t num_edges, const Member& member = Member{}) {
  const std::int64_t first = *row.At(cur), end = *row.At(cur + 1);
  if (first < 0 || end < first || static_cast<std::uint64_t>(end) > num_edges) return walk_fault;
  const std::int64_t degree = end - first;
  if (degree == 0) return walk_dead_end;
  const std::uint64_t base = static_cast<std::uint64_t>(step) << 32;
  auto neighbor = [&](std::uint64_t x) {
    const auto pos = static_cast<std::int64_t>(rand_below(x, static_cast<std::uint64_t>(degree)));
    const auto v = static_cast<std::int64_t>(*col.At(first + pos));
    return v >= 0 && static_cast<std::uint64_t>(v) < num_nodes ? v : walk_fault;
  };
  if (!r.second_order || prev < 0) return neighbor(draw(key, base));
  const std::int64_t pfirst = *row.At(prev), pend = *row.At(prev + 1);
  if (pfirst < 0 || pend < pfirst || static_cast<std::uint64_t>(pend) > num_edges) {
    return walk_fault;
  }
  std::int64_t v = walk_fault;
  for (std::uint32_t t = 0; t < max_walk_trials; ++t) {
    const std::uint64_t c = base + 2 * static_cast<std::uint64_t>(t);
    v = neighbor(draw(key, c));
    if (v < 0) return v;
    // Accepted exactly when u < ratio (u < 1, so a ratio of 1 always accepts).  Whether v
    // neighbors the previous node only matters when u falls between the neighbor and away
    // ratios: outside that band both give the same answer and the scan is skipped.
    const double u = static_cast<double>(draw(key, c + 1) >> 11) * 0x1.0p-53;
    if (v == prev) {
      if (u < r.back_ratio) return v;
      continue;
    }
    const double lo = r.neighbor_ratio < r.away_ratio ? r.neighbor_ratio : r.away_ratio;
    const double hi = r.neighbor_ratio < r.away_ratio ? r.away_ratio : r.neighbor_ratio;
    if (u < lo) return v;
    if (u >= hi) continue;
    const double ratio = member(col, prev, pfirst, pend, v) ? r.neighbor_ratio : r.away_ratio;
    if (u < ratio) return v;
  }
  return v;
}

/// node2vec on a distributed graph, where the owner of the current node draws the step but
/// the previous node's list lives on its own owner.  The trials of walk_step (second order,
/// prev >= 0) from trial `t`, `neighbor(x)` giving the candidate of draw x (walk_fault for a
/// bad one): the next node, walk_fault, or walk_ask when trial `t` needs to know whether its
/// candidate, left in `candidate`, neighbors `prev`; then prev's owner answers and
/// node2vec_resume goes on.  `candidate` starts as walk_fault.  Decides as walk_step does, so
/// the walks are the same.
constexpr std::int64_t walk_ask = -3;

template <typename Neighbor>
WM_HOST_DEVICE std::int64_t node2vec_trials(const walk_rule& r, std::uint64_t key,
                                            std::uint32_t step, std::int64_t prev, std::uint32_t& t,
                                            std::int64_t& candidate, const Neighbor& neighbor) {
  const std::uint64_t base = static_cast<std::uint64_t>(step) << 32;
  const double lo = r.neighbor_ratio < r.away_ratio ? r.neighbor_ratio : r.away_ratio;
  const double hi = r.neighbor_ratio < r.away_ratio ? r.away_ratio : r.neighbor_ratio;
  for (; t < max_walk_trials; ++t) {
    const std::uint64_t c = base + 2 * static_cast<std::uint64_t>(t);
    candidate = neighbor(draw(key, c));
    if (candidate < 0) return candidate;
    const double u = static_cast<double>(draw(key, c + 1) >> 11) * 0x1.0p-53;
    if (candidate == prev) {
      if (u < r.back_ratio) return candidate;
      continue;
    }
    if (u < lo) return candidate;
    if (u >= hi) continue;
    return walk_ask;
  }
  return candidate;
}

/// After walk_ask: trial t's candidate is taken when `member` (it neighbors prev) gives a ratio
/// above the trial's draw; otherwise the trials go on from t + 1 (the last candidate is taken
/// after max_walk_trials).
template <typename Neighbor>
WM_HOST_DEVICE std::int64_t node2vec_resume(const walk_rule& r, std::uint64_t key,
                                            std::uint32_t step, std::int64_t prev, bool member,
                                            std::uint32_t& t, std::int64_t& candidate,
                                            const Neighbor& neighbor) {
  const std::uint64_t c =
      (static_cast<std::uint64_t>(step) << 32) + 2 * static_cast<std::uint64_t>(t);
  const double u = static_cast<double>(draw(key, c + 1) >> 11) * 0x1.0p-53;
  if (u < (member ? r.neighbor_ratio : r.away_ratio)) return candidate;
  if (++t >= max_walk_trials) return candidate;
  return node2vec_trials(r, key, step, prev, t, candidate, neighbor);
}

}  // namespace wholestore::graph::detail
