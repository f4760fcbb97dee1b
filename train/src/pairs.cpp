// A batch's pairs (trainer::assemble, trainer_impl.hpp): the slots' walks (DeepWalk,
// node2vec) or edges (LINE), their negatives, and the (center, targets) pairs, on the host or
// on the GPU; every choice keyed by (seed, epoch, slot) (train/trainer.hpp).
#include "trainer_impl.hpp"

#include <graph/random.hpp>
#include <wholememory/device.hpp>

#include <algorithm>
#include <utility>

namespace wholestore::train::detail {

namespace {

using graph::mix64;

// A shuffle of all nodes keyed by (seed, epoch, round): Fisher-Yates on a counter-based mix.
std::vector<std::int64_t> round_order(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch,
                                      std::uint64_t round) {
  std::vector<std::int64_t> ids(n);
  for (std::uint64_t i = 0; i < n; ++i) ids[i] = static_cast<std::int64_t>(i);
  const std::uint64_t key = mix64(mix64(seed ^ 0x6a09e667f3bcc909ull) ^ mix64(epoch) ^
                                  mix64(round + 0x3c6ef372fe94f82bull));
  for (std::uint64_t i = n; i > 1; --i) {
    const std::uint64_t j = graph::rand_below(mix64(key + i), i);
    std::swap(ids[i - 1], ids[j]);
  }
  return ids;
}

}  // namespace

std::size_t trainer::assemble(std::uint64_t epoch, std::uint64_t lo, std::uint64_t hi, int set) {
  if (lo >= hi) {
    // This rank has no slots in the batch; it joins the other ranks' walks with none.
    if (collective_walks()) walk(nullptr, 0, walk_options_of(epoch, 0), nullptr);
    return 0;
  }
  if (s_.use_gpu) wait_event(assembly_stream_, pairs_free_[set]);
  const std::size_t pairs = assemble_into(epoch, lo, hi, set);
  if (s_.use_gpu) record_event(pairs_ready_[set], assembly_stream_);
  return pairs;
}

graph::walk_options trainer::walk_options_of(std::uint64_t epoch, std::uint64_t first_walk) const {
  graph::walk_options wo;
  wo.length = s_.walk_length;
  if (s_.mode == train_mode::node2vec) {
    wo.p = s_.p;
    wo.q = s_.q;
  }
  wo.seed = epoch_key(s_.seed, epoch, 1);
  wo.first_walk = first_walk;
  return wo;
}

void trainer::walk(const std::int64_t* starts, std::size_t count, const graph::walk_options& wo,
                   std::int64_t* out) {
  if (s_.use_gpu) {
    walker_->walk(starts, count, wo, out, assembly_stream_);
  } else {
    graph::random_walks_host(graph_, starts, count, wo, out, s_.threads);
  }
}

std::size_t trainer::assemble_into(std::uint64_t epoch, std::uint64_t lo, std::uint64_t hi,
                                   int set) {
  const std::uint64_t k = static_cast<std::uint64_t>(s_.negatives);
  const std::uint64_t draw_key = epoch_key(s_.seed, epoch, 2);
  const std::size_t slots = static_cast<std::size_t>(hi - lo);
  if (line_on_gpu()) {
    // Edges as pairs on the device: the negatives drawn there, then one thread per slot.
    auto* d_draws = static_cast<std::int64_t*>(
        d_draws_.reserve_discard(std::max<std::size_t>(slots * k, 1) * 8, device_));
    if (k) negatives_->sample(draw_key, lo * k, slots * k, d_draws, assembly_stream_);
    graph::edge_pairs_args ea;
    ea.key = epoch_key(s_.seed, epoch, 3);
    ea.lo = lo;
    ea.hi = hi;
    ea.negatives = d_draws;
    ea.negatives_per_pair = s_.negatives;
    ea.centers = device_indices(d_centers_[set], slots);
    ea.targets = device_indices(d_targets_[set], slots * (k + 1));
    graph::edge_pairs(graph_, ea, assembly_stream_);
    return slots;
  }
  if (s_.mode == train_mode::line) {
    // Edges as pairs on the host: the CPU path, and a distributed graph on the GPU path.
    draws_.resize(slots * k);
    negatives_->sample_host(draw_key, lo * k, draws_.size(), draws_.data(), s_.threads);
    centers_.resize(slots);
    targets_.resize(slots * (k + 1));
    const std::uint64_t key = epoch_key(s_.seed, epoch, 3);
    const std::uint64_t edges = split_.train.num_edges();
    for (std::uint64_t slot = lo; slot < hi; ++slot) {
      const auto e = graph::rand_below(graph::draw(key, slot), edges);
      const std::size_t p = static_cast<std::size_t>(slot - lo);
      centers_[p] = edge_src_[e];
      targets_[p * (k + 1)] = split_.train.col_indices[e];
      std::copy(draws_.begin() + p * k, draws_.begin() + (p + 1) * k,
                targets_.begin() + p * (k + 1) + 1);
    }
    if (s_.use_gpu) {
      wm::copy_bytes(device_indices(d_centers_[set], slots), centers_.data(), slots * 8);
      wm::copy_bytes(device_indices(d_targets_[set], slots * (k + 1)), targets_.data(),
                     slots * (k + 1) * 8);
    }
    return slots;
  }
  const std::uint64_t w0 = lo / slots_, w1 = (hi - 1) / slots_ + 1;
  const std::size_t count = static_cast<std::size_t>(w1 - w0);
  const std::size_t row = static_cast<std::size_t>(s_.walk_length) + 1;
  starts_.resize(count);
  for (std::uint64_t w = w0; w < w1; ++w) {
    const std::uint64_t round = w / nodes_;
    if (epoch != order_epoch_ || round != order_round_) {  // O(nodes): once per round
      order_ = round_order(nodes_, s_.seed, epoch, round);
      order_epoch_ = epoch;
      order_round_ = round;
    }
    starts_[w - w0] = order_[w % nodes_];
  }
  const graph::walk_options wo = walk_options_of(epoch, w0);
  graph::window_pairs_args pa;
  pa.first_walk = w0;
  pa.walk_count = count;
  pa.walk_length = s_.walk_length;
  pa.window = s_.window;
  pa.lo = lo;
  pa.hi = hi;
  pa.negatives_per_pair = s_.negatives;
  if (s_.use_gpu) {
    // Walks, negatives and pairs on the device: only the starts go up and the pair count
    // comes back.
    auto* d_starts = static_cast<std::int64_t*>(d_starts_.reserve_discard(count * 8, device_));
    auto* d_walks = static_cast<std::int64_t*>(d_walks_.reserve_discard(count * row * 8, device_));
    auto* d_draws = static_cast<std::int64_t*>(d_draws_.reserve_discard(slots * k * 8, device_));
    // On assembly_stream_, not through the legacy stream (copy_bytes), which would wait for
    // the step running on stream_.  The walk waits for assembly_stream_ before it returns,
    // so starts_ is free again before the next call.
    copy_on(assembly_stream_, d_starts, starts_.data(), count * 8);
    walk(d_starts, count, wo, d_walks);
    negatives_->sample(draw_key, lo * k, slots * k, d_draws, assembly_stream_);
    pa.walks = d_walks;
    pa.negatives = d_draws;
    pa.centers = device_indices(d_centers_[set], slots);
    pa.targets = device_indices(d_targets_[set], slots * (k + 1));
    return gpu_pairs_.build(pa, assembly_stream_);
  }
  walks_.resize(count * row);
  walk(starts_.data(), count, wo, walks_.data());
  draws_.resize(slots * k);
  negatives_->sample_host(draw_key, lo * k, draws_.size(), draws_.data(), s_.threads);
  centers_.resize(slots);
  targets_.resize(slots * (k + 1));
  pa.walks = walks_.data();
  pa.negatives = draws_.data();
  pa.centers = centers_.data();
  pa.targets = targets_.data();
  return graph::window_pairs_host(pa);
}

std::int64_t* trainer::device_indices(wm::device_buffer& b, std::size_t count) {
  return static_cast<std::int64_t*>(
      b.reserve_discard(std::max<std::size_t>(count, 1) * 8, device_));
}

}  // namespace wholestore::train::detail
