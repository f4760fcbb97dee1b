/*
 * A deliberately naive sampler written from the text of sampling.hpp and sample_select.hpp,
 * for exact comparison with sample_host: std::set for Floyd, a full std::sort of the race for
 * the weighted method, std::map for relabelling, and a host_csr read directly.  Only det_log
 * comes from the library (its value is defined by its exact operation sequence); the
 * randomness below is re-derived from the spec and checked against SplitMix64 separately.
 */
#pragma once

#include <graph/dataset.hpp>
#include <graph/detail/sample_select.hpp>
#include <graph/sampling.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace sampling_ref {

using wholestore::graph::block;
using wholestore::graph::host_csr;
using wholestore::graph::sample_method;
using wholestore::graph::sample_options;
using wholestore::graph::sample_result;

constexpr std::uint64_t gamma = 0x9E3779B97F4A7C15ull;

/// SplitMix64's output function applied to state z (the state advanced once).
inline std::uint64_t mix(std::uint64_t z) {
  z += gamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline std::uint64_t key_of(std::uint64_t seed, int hop, std::int64_t node) {
  return mix(mix(mix(seed) ^ static_cast<std::uint64_t>(hop)) ^ static_cast<std::uint64_t>(node));
}

inline std::uint64_t draw(std::uint64_t key, std::uint64_t c) { return mix(key + c * gamma); }

inline std::uint64_t below(std::uint64_t x, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(x) * n) >> 64);
}

/// Positions of one node, in the order the spec returns them.
inline std::vector<std::int64_t> positions(sample_method m, std::uint64_t key, std::int64_t d,
                                           int k, const float* w) {
  std::vector<std::int64_t> out;
  if (k < 0) {
    for (std::int64_t i = 0; i < d; ++i) out.push_back(i);
    return out;
  }
  if (m == sample_method::uniform) {
    if (d <= k) {
      for (std::int64_t i = 0; i < d; ++i) out.push_back(i);
      return out;
    }
    std::set<std::int64_t> chosen;
    for (int c = 0; c < k; ++c) {
      std::int64_t j = d - k + c;
      auto t = static_cast<std::int64_t>(
          below(draw(key, static_cast<std::uint64_t>(c)), static_cast<std::uint64_t>(j + 1)));
      chosen.insert(chosen.count(t) ? j : t);
    }
    return {chosen.begin(), chosen.end()};
  }
  if (m == sample_method::uniform_with_replacement) {
    if (d == 0) return out;
    for (int c = 0; c < k; ++c) {
      out.push_back(static_cast<std::int64_t>(
          below(draw(key, static_cast<std::uint64_t>(c)), static_cast<std::uint64_t>(d))));
    }
    return out;
  }
  // weighted: every positive-weight edge with its race time, all sorted, the first k taken.
  std::vector<std::pair<double, std::int64_t>> race;
  for (std::int64_t i = 0; i < d; ++i) {
    if (!(w[i] > 0.0f)) continue;
    double u = (static_cast<double>(draw(key, static_cast<std::uint64_t>(i)) >> 11) + 0.5) *
               (1.0 / 9007199254740992.0);
    race.emplace_back(-wholestore::graph::detail::det_log(u) / static_cast<double>(w[i]), i);
  }
  std::sort(race.begin(), race.end());  // (time, position): ties go to the smaller position
  for (std::size_t i = 0; i < race.size() && i < static_cast<std::size_t>(k); ++i) {
    out.push_back(race[i].second);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The whole multi-hop sample, relabelled with std::map.
inline sample_result sample(const host_csr& g, const std::vector<std::int64_t>& seeds,
                            const sample_options& o) {
  sample_result r;
  std::vector<std::int64_t> dst;
  for (std::int64_t s : seeds) {
    if (std::find(dst.begin(), dst.end(), s) == dst.end()) dst.push_back(s);
  }
  for (std::size_t h = 0; h < o.fanouts.size(); ++h) {
    block b;
    b.num_dst = static_cast<std::int64_t>(dst.size());
    b.src_nodes = dst;
    std::map<std::int64_t, std::int32_t> local;
    for (std::size_t i = 0; i < dst.size(); ++i) local[dst[i]] = static_cast<std::int32_t>(i);
    b.offsets.push_back(0);
    for (std::int64_t v : dst) {
      const std::int64_t first = g.row_offsets[static_cast<std::size_t>(v)];
      const std::int64_t d = g.row_offsets[static_cast<std::size_t>(v) + 1] - first;
      const float* w = g.edge_weights.empty() ? nullptr : g.edge_weights.data() + first;
      for (std::int64_t p :
           positions(o.method, key_of(o.random_seed, static_cast<int>(h), v), d, o.fanouts[h], w)) {
        std::int64_t nb = g.col_indices[static_cast<std::size_t>(first + p)];
        auto it = local.find(nb);
        if (it == local.end()) {
          it = local.emplace(nb, static_cast<std::int32_t>(b.src_nodes.size())).first;
          b.src_nodes.push_back(nb);
        }
        b.src_index.push_back(it->second);
        if (o.edge_ids) b.edge_ids.push_back(first + p);
      }
      b.offsets.push_back(static_cast<std::int64_t>(b.src_index.size()));
    }
    dst = b.src_nodes;
    r.blocks.push_back(std::move(b));
  }
  return r;
}

}  // namespace sampling_ref
