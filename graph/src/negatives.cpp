// negative_sampler: the alias table (Vose's method, in node order, so every rank builds the
// same table), its placement in WholeMemory, and the CPU draws.
#include <graph/negatives.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

namespace wholestore::graph {

namespace wm = wholememory;

namespace {

std::vector<alias_entry> build_alias_table(const std::vector<std::int64_t>& row_offsets,
                                           const negative_options& o) {
  WM_EXPECTS(row_offsets.size() >= 2, "negative_sampler: a graph without nodes");
  WM_EXPECTS(std::isfinite(o.power), "negative_sampler: power " << o.power << " is not finite");
  const std::size_t n = row_offsets.size() - 1;
  std::vector<double> w(n);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t d = row_offsets[i + 1] - row_offsets[i];
    WM_EXPECTS(d >= 0, "negative_sampler: row offsets decrease at node " << i);
    w[i] = !o.by_degree ? 1.0 : (d > 0 ? std::pow(static_cast<double>(d), o.power) : 0.0);
    total += w[i];
  }
  WM_EXPECTS(total > 0 && std::isfinite(total),
             "negative_sampler: no node has a positive weight (every out-degree is 0?)");
  // Vose: scaled weights p_i = w_i * n / total; small (< 1) and large (>= 1) work lists.
  std::vector<double> p(n);
  std::vector<std::size_t> small, large;
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = w[i] * static_cast<double>(n) / total;
    (p[i] < 1.0 ? small : large).push_back(i);
  }
  std::vector<alias_entry> t(n);
  constexpr double two32 = 4294967296.0;
  auto threshold = [&](double prob) {
    const double x = std::nearbyint(std::clamp(prob, 0.0, 1.0) * two32);
    return static_cast<std::uint64_t>(x);
  };
  while (!small.empty() && !large.empty()) {
    const std::size_t s = small.back(), l = large.back();
    small.pop_back();
    large.pop_back();
    t[s] = alias_entry{threshold(p[s]), static_cast<std::int64_t>(l)};
    p[l] = (p[l] + p[s]) - 1.0;
    (p[l] < 1.0 ? small : large).push_back(l);
  }
  // A zero-weight node left over through rounding points at the heaviest node instead.
  const auto heaviest = static_cast<std::int64_t>(std::max_element(w.begin(), w.end()) - w.begin());
  // Leftovers hold (up to rounding) probability 1: always keep the bucket.
  for (std::size_t i : large)
    t[i] = alias_entry{std::uint64_t{1} << 32, static_cast<std::int64_t>(i)};
  for (std::size_t i : small) {
    // A zero-weight node can only be left here through rounding: never keep it.
    t[i] = alias_entry{w[i] > 0 ? std::uint64_t{1} << 32 : 0, static_cast<std::int64_t>(i)};
    if (w[i] == 0) t[i].alias = heaviest;
  }
  return t;
}

std::vector<std::int64_t> read_row_offsets(const csr_graph& g) {
  WM_EXPECTS(static_cast<bool>(g.row_offsets), "negative_sampler: an empty graph");
  WM_EXPECTS(g.type() != wm::memory_type::distributed,
             "negative_sampler: the graph is in distributed memory; pass its row offsets "
             "(the other constructor) or use continuous or chunked memory");
  std::vector<std::int64_t> out(g.num_nodes + 1);
  for (int i = 0; i < g.row_offsets.num_parts(); ++i) {
    const wm::part_info part = g.row_offsets.part(i);
    if (part.bytes == 0) continue;
    WM_EXPECTS(part.ptr != nullptr, "negative_sampler: part " << i << " is not mapped here");
    wm::copy_bytes(reinterpret_cast<char*>(out.data()) + part.offset, part.ptr, part.bytes);
  }
  return out;
}

}  // namespace

negative_sampler::negative_sampler(std::shared_ptr<wm::communicator> comm,
                                   const std::vector<std::int64_t>& row_offsets,
                                   const negative_options& o) {
  WM_EXPECTS(o.type != wm::memory_type::distributed,
             "negative_sampler: the table needs continuous or chunked memory (every draw may "
             "read any entry)");
  host_copy_ = build_alias_table(row_offsets, o);
  nodes_ = host_copy_.size();
  wm::allocation_options ao;
  ao.granularity = sizeof(alias_entry);
  ao.name = "the negative sampler's alias table";
  table_ = wm::allocation::create(comm, nodes_ * sizeof(alias_entry), o.type, o.location, ao);
  const wm::part_info mine = table_.local_part();
  if (mine.bytes > 0) {
    wm::copy_bytes(mine.ptr, reinterpret_cast<const char*>(host_copy_.data()) + mine.offset,
                   mine.bytes);
  }
  comm->get_bootstrap().barrier();
}

negative_sampler::negative_sampler(std::shared_ptr<wm::communicator> comm, const csr_graph& graph,
                                   const negative_options& o)
    : negative_sampler(std::move(comm), read_row_offsets(graph), o) {}

double negative_sampler::probability(std::int64_t node) const {
  WM_EXPECTS(node >= 0 && static_cast<std::uint64_t>(node) < nodes_,
             "negative_sampler::probability: node " << node << " of " << nodes_);
  const double two32 = 4294967296.0, n = static_cast<double>(nodes_);
  double p = static_cast<double>(host_copy_[node].threshold) / two32 / n;
  for (std::uint64_t b = 0; b < nodes_; ++b) {
    if (host_copy_[b].alias == node && static_cast<std::int64_t>(b) != node)
      p += (two32 - static_cast<double>(host_copy_[b].threshold)) / two32 / n;
  }
  return p;
}

void negative_sampler::sample_host(std::uint64_t seed, std::uint64_t first_draw, std::size_t count,
                                   std::int64_t* out, unsigned threads) const {
  WM_EXPECTS(table_.location() == wm::memory_location::host,
             "negative_sampler::sample_host: the table is in device memory; use sample()");
  WM_EXPECTS(count == 0 || out != nullptr, "negative_sampler::sample_host: null output");
  const std::uint64_t key = detail::negatives_key(seed);
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = static_cast<unsigned>(std::min<std::size_t>(threads, count / 65536 + 1));
  auto run = [&](auto gen) {
    std::vector<std::thread> pool;
    auto part = [&](unsigned k) {
      const std::size_t b = count * k / threads, e = count * (k + 1) / threads;
      for (std::size_t i = b; i < e; ++i)
        out[i] = detail::alias_draw(gen, nodes_, key, first_draw + i);
    };
    for (unsigned k = 1; k < threads; ++k) pool.emplace_back(part, k);
    part(0);
    for (auto& t : pool) t.join();
  };
  if (table_.type() == wm::memory_type::continuous) {
    run(wm::PtrGen<const alias_entry, const alias_entry>(
        static_cast<const alias_entry*>(table_.data())));
  } else {
    const wm::chunked_view view = table_.host_view();
    run(wm::PtrGen<const wm::chunked_view, const alias_entry>(&view));
  }
}

}  // namespace wholestore::graph
