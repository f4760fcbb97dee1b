// The `blocks` schedule (train/trainer.hpp): episodes of pairs grouped into P x P blocks,
// trained in P rounds of disjoint blocks on per-rank working copies of two partitions, with
// no exchange inside a round.
#include "trainer_impl.hpp"

#include <embedding/sgns.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <future>
#include <numeric>

namespace wholestore::train::detail {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

void trainer::setup_blocks() {
  const int ranks = bs_->size();
  partitions_ = s_.partitions > 0 ? s_.partitions : ranks;
  s_.partitions = partitions_;  // what state.txt records
  WM_EXPECTS(partitions_ % ranks == 0, "schedule blocks: partitions must be a multiple of the "
                                           << ranks << " ranks, got " << partitions_);
  WM_EXPECTS(static_cast<std::uint64_t>(partitions_) <= nodes_,
             "schedule blocks: " << partitions_ << " partitions of a graph of " << nodes_
                                 << " nodes; use at most one partition per node");
  WM_EXPECTS(s_.block_steps >= 0, "block_steps must be >= 0, got " << s_.block_steps);
  WM_EXPECTS(s_.table_type != wm::memory_type::distributed,
             "schedule blocks needs continuous or chunked tables (table.type), whose "
             "partitions every rank copies in place; distributed tables train with schedule "
             "global");
  const graph::block_layout layout{nodes_, partitions_};
  embedding::table_options to;
  to.rows = layout.max_rows();
  to.dim = s_.dim;
  to.type = wm::memory_type::continuous;
  to.location = s_.use_gpu ? wm::memory_location::device : wm::memory_location::host;
  to.optimizer = s_.optimizer;
  to.init.method = embedding::init_options::zeros;
  work_in_ = embedding::table::create(self_comm_, to);
  work_out_ = embedding::table::create(self_comm_, to);
  part_nodes_.resize(static_cast<std::size_t>(partitions_));
  for (int c = 0; c < partitions_; ++c) {
    auto& ids = part_nodes_[static_cast<std::size_t>(c)];
    ids.resize(layout.rows(c));
    for (std::size_t r = 0; r < ids.size(); ++r)
      ids[r] = static_cast<std::int64_t>(r) * partitions_ + c;
  }
  // Each partition's negatives from its own alias table: the sampler's law restricted to it
  // (a partition whose nodes all lack out-edges draws its rows uniformly).
  graph::negative_options no;
  no.by_degree = s_.negatives_by_degree;
  no.location = to.location;
  for (int c = 0; c < partitions_; ++c) {
    const auto& ids = part_nodes_[static_cast<std::size_t>(c)];
    std::vector<std::int64_t> offsets(ids.size() + 1, 0);
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const auto v = static_cast<std::size_t>(ids[r]);
      offsets[r + 1] = offsets[r] + split_.train.row_offsets[v + 1] - split_.train.row_offsets[v];
    }
    graph::negative_options mine = no;
    if (offsets.back() == 0) mine.by_degree = false;
    part_negatives_.push_back(std::make_unique<graph::negative_sampler>(self_comm_, offsets, mine));
    part_tables_.push_back(
        static_cast<const graph::alias_entry*>(part_negatives_.back()->table().data()));
  }
  if (s_.use_gpu) {
    wm::copy_bytes(d_part_tables_.reserve_discard(part_tables_.size() * sizeof(void*), device_),
                   part_tables_.data(), part_tables_.size() * sizeof(void*));
    d_part_nodes_.resize(static_cast<std::size_t>(partitions_));
    for (int c = 0; c < partitions_; ++c) {
      const auto& ids = part_nodes_[static_cast<std::size_t>(c)];
      wm::copy_bytes(device_indices(d_part_nodes_[static_cast<std::size_t>(c)], ids.size()),
                     ids.data(), ids.size() * 8);
    }
  }
}

void trainer::move_partition(embedding::table& global, embedding::table& work, int c,
                             bool to_global) {
  const auto& ids = part_nodes_[static_cast<std::size_t>(c)];
  if (ids.empty()) return;
  const void* id_data = s_.use_gpu ? d_part_nodes_[static_cast<std::size_t>(c)].data()
                                   : static_cast<const void*>(ids.data());
  const wm::index_array idx{id_data, wm::dtype::int64, ids.size()};
  // Weights, then each optimizer state array: the same shapes in both tables.
  const std::size_t arrays = 1 + global.state().size();
  for (std::size_t a = 0; a < arrays; ++a) {
    const wm::wm_tensor g = a == 0 ? global.weights() : global.state_tensor(a - 1);
    const wm::wm_tensor w = a == 0 ? work.weights() : work.state_tensor(a - 1);
    void* base = a == 0 ? work.weights_memory().data() : work.state()[a - 1].data();
    const wm::dense_matrix local{static_cast<char*>(base) + w.col_offset * 4, wm::dtype::float32,
                                 ids.size(), w.cols, w.row_stride};
    if (s_.use_gpu) {
      if (to_global) {
        wm::gather_options o;
        o.unique_indices = true;
        wm::scatter(local, idx, g, o, stream_);
      } else {
        wm::gather(g, idx, local, stream_);
      }
    } else if (to_global) {
      wm::scatter_host(local, idx, g, s_.threads);
    } else {
      wm::gather_host(g, idx, local, s_.threads);
    }
  }
}

trainer::grouped_pairs trainer::group_episode(std::uint64_t epoch, std::uint64_t s0,
                                              std::uint64_t s1, int set) {
  const int rank = bs_->rank(), ranks = bs_->size(), parts = partitions_;
  const std::size_t bins = static_cast<std::size_t>(parts) * static_cast<std::size_t>(parts);
  const std::size_t per = static_cast<std::size_t>(s_.negatives) + 1;
  const std::uint64_t lo = s0 + (s1 - s0) * static_cast<std::uint64_t>(rank) / ranks;
  const std::uint64_t hi = s0 + (s1 - s0) * static_cast<std::uint64_t>(rank + 1) / ranks;
  grouped_pairs out;
  out.set = set;
  out.pairs = assemble(epoch, lo, hi, set);
  const std::size_t n = out.pairs;
  out.counts.assign(bins, 0);
  std::vector<std::uint64_t>& counts = out.counts;
  graph::block_pairs_args a;
  a.layout = {nodes_, parts};
  a.pairs = n;
  a.negatives_per_pair = s_.negatives;
  a.counts = counts.data();
  a.negative_key = epoch_key(s_.seed, epoch, 4);
  a.tables =
      s_.use_gpu ? d_part_tables_.data_as<const graph::alias_entry* const>() : part_tables_.data();
  if (s_.use_gpu) {
    a.centers = d_centers_[set].data_as<std::int64_t>();
    a.targets = d_targets_[set].data_as<std::int64_t>();
    a.out_centers = device_indices(d_sent_centers_[set], n);
    a.out_targets = device_indices(d_sent_targets_[set], n * per);
    gpu_blocks_.build(a, assembly_stream_);  // waits for assembly_stream_
  } else {
    sent_centers_.resize(n);
    sent_targets_.resize(n * per);
    a.centers = centers_.data();
    a.targets = targets_.data();
    a.out_centers = sent_centers_.data();
    a.out_targets = sent_targets_.data();
    graph::block_pairs_host(a);
  }
  return out;
}

void trainer::exchange_episode(const grouped_pairs& g) {
  const int rank = bs_->rank(), ranks = bs_->size(), parts = partitions_;
  const std::size_t bins = static_cast<std::size_t>(parts) * static_cast<std::size_t>(parts);
  const std::size_t per = static_cast<std::size_t>(s_.negatives) + 1;
  // Blocks of node partitions [rank * P/R, (rank + 1) * P/R): a contiguous range of block ids.
  const std::size_t my_blocks = bins / static_cast<std::size_t>(ranks);
  const std::size_t first = my_blocks * static_cast<std::size_t>(rank);
  const std::vector<std::uint64_t>& counts = g.counts;
  const std::size_t n = g.pairs;
  const int set = g.set;
  std::int64_t* sent_centers =
      s_.use_gpu ? d_sent_centers_[set].data_as<std::int64_t>() : sent_centers_.data();
  std::int64_t* sent_targets =
      s_.use_gpu ? d_sent_targets_[set].data_as<std::int64_t>() : sent_targets_.data();
  std::vector<std::uint64_t> all(bins * static_cast<std::size_t>(ranks));
  bs_->allgather(counts.data(), all.data(), bins * 8);
  auto count_of = [&](int r, std::size_t b) { return all[static_cast<std::size_t>(r) * bins + b]; };
  // Block first + j's pairs start at block_start_[j]; within it, rank r's come after those of
  // ranks before r (slot order: the ranks' slot ranges are in rank order).
  block_start_.assign(my_blocks + 1, 0);
  for (std::size_t j = 0; j < my_blocks; ++j) {
    std::uint64_t in_block = 0;
    for (int r = 0; r < ranks; ++r) in_block += count_of(r, first + j);
    block_start_[j + 1] = block_start_[j] + in_block;
  }
  const std::size_t total = block_start_[my_blocks];
  if (ranks == 1) {  // the grouped pairs are the rank's blocks already
    blocks_at_ = {sent_centers, sent_targets};
    return;
  }
  // Rank d trains blocks [d * my_blocks, (d + 1) * my_blocks): one contiguous run of the
  // grouped pairs goes to each rank, and each rank's run arrives in rank order.
  std::vector<std::size_t> send_counts(static_cast<std::size_t>(ranks)),
      send_displs(static_cast<std::size_t>(ranks)), recv_counts(static_cast<std::size_t>(ranks)),
      recv_displs(static_cast<std::size_t>(ranks));
  std::size_t sent = 0, received = 0;
  for (int d = 0; d < ranks; ++d) {
    const auto du = static_cast<std::size_t>(d);
    std::size_t mine = 0, theirs = 0;
    for (std::size_t j = 0; j < my_blocks; ++j) {
      mine += counts[du * my_blocks + j];
      theirs += count_of(d, first + j);
    }
    send_counts[du] = mine;
    send_displs[du] = sent;
    recv_counts[du] = theirs;
    recv_displs[du] = received;
    sent += mine;
    received += theirs;
  }
  auto scaled = [per](std::vector<std::size_t> v) {
    for (auto& x : v) x *= per;
    return v;
  };
  const bool device_exchange = s_.use_gpu && comm_->get_backend() == wm::backend::nccl;
  std::int64_t *rc = nullptr, *rt = nullptr;
  if (device_exchange) {
    rc = device_indices(d_recv_centers_, received);
    rt = device_indices(d_recv_targets_, received * per);
    // The counts crossed in the allgather above: agreed.
    comm_->alltoallv_agreed(sent_centers, send_counts.data(), send_displs.data(), rc,
                            recv_counts.data(), recv_displs.data(), wm::dtype::int64, stream_);
    comm_->alltoallv_agreed(sent_targets, scaled(send_counts).data(), scaled(send_displs).data(),
                            rt, scaled(recv_counts).data(), scaled(recv_displs).data(),
                            wm::dtype::int64, stream_);
  } else {
    if (s_.use_gpu) {  // a host communicator: through host memory
      sent_centers_.resize(n);
      sent_targets_.resize(n * per);
      wm::copy_bytes(sent_centers_.data(), sent_centers, n * 8);
      wm::copy_bytes(sent_targets_.data(), sent_targets, n * per * 8);
    }
    recv_centers_.resize(std::max<std::size_t>(received, 1));
    recv_targets_.resize(std::max<std::size_t>(received * per, 1));
    comm_->alltoallv(sent_centers_.data(), send_counts.data(), send_displs.data(),
                     recv_centers_.data(), recv_counts.data(), recv_displs.data(), wm::dtype::int64,
                     nullptr);
    comm_->alltoallv(sent_targets_.data(), scaled(send_counts).data(), scaled(send_displs).data(),
                     recv_targets_.data(), scaled(recv_counts).data(), scaled(recv_displs).data(),
                     wm::dtype::int64, nullptr);
    rc = recv_centers_.data();
    rt = recv_targets_.data();
    if (s_.use_gpu) {
      auto* dc = device_indices(d_recv_centers_, received);
      auto* dt = device_indices(d_recv_targets_, received * per);
      wm::copy_bytes(dc, rc, received * 8);
      wm::copy_bytes(dt, rt, received * per * 8);
      rc = dc;
      rt = dt;
    }
  }
  // Each rank's run, grouped by block, into block order.
  std::int64_t *bc = nullptr, *bt = nullptr;
  if (s_.use_gpu) {
    bc = device_indices(d_block_centers_, total);
    bt = device_indices(d_block_targets_, total * per);
  } else {
    block_centers_.resize(std::max<std::size_t>(total, 1));
    block_targets_.resize(std::max<std::size_t>(total * per, 1));
    bc = block_centers_.data();
    bt = block_targets_.data();
  }
  for (int r = 0; r < ranks; ++r) {
    std::size_t from = recv_displs[static_cast<std::size_t>(r)];
    for (std::size_t j = 0; j < my_blocks; ++j) {
      std::size_t to = block_start_[j];
      for (int q = 0; q < r; ++q) to += count_of(q, first + j);
      const std::size_t len = count_of(r, first + j);
      if (len) {
        if (s_.use_gpu) {
          copy_on(stream_, bc + to, rc + from, len * 8);
          copy_on(stream_, bt + to * per, rt + from * per, len * per * 8);
        } else {
          std::memcpy(bc + to, rc + from, len * 8);
          std::memcpy(bt + to * per, rt + from * per, len * per * 8);
        }
      }
      from += len;
    }
  }
  blocks_at_ = {bc, bt};
}

void trainer::block_step(const std::int64_t* centers, const std::int64_t* targets, std::size_t n,
                         float lr, std::uint64_t t, step_totals& round) {
  const std::size_t per = static_cast<std::size_t>(s_.negatives) + 1, nt = n * per;
  const std::size_t dim = s_.dim;
  work_in_.set_step(t);
  work_out_.set_step(t);
  if (s_.use_gpu) {
    auto* cg = static_cast<float*>(d_center_grads_.reserve_discard((n + 1) * dim * 4, device_));
    auto* tc = static_cast<float*>(d_target_coefs_.reserve_discard((nt + 1) * 4, device_));
    auto* totals = d_totals_.data_as<long long>();
    embedding::sgns_batch b{nullptr, nullptr, n, s_.negatives, dim, cg, nullptr, nullptr};
    b.loss_units = totals;
    b.nonfinite_pairs = reinterpret_cast<unsigned long long*>(totals + 1);
    b.loss_scale = loss_unit;
    b.target_coefs = tc;
    embedding::sgns_table_batch tb;
    tb.input = work_in_.view(device_);
    tb.output = work_out_.view(device_);
    tb.center_rows = centers;
    tb.target_rows = targets;
    tb.out = b;
    tb.first_bad = reinterpret_cast<unsigned long long*>(totals + 3);
    embedding::sgns_gradients_from_tables(tb, stream_);
    embedding::apply_options checked;
    checked.deferred_check = reinterpret_cast<unsigned long long*>(totals + 3);
    // The output table first: by reference it reads the input rows the gradients came from.
    embedding::scaled_rows by_center;
    by_center.source = &work_in_;
    by_center.source_rows = {centers, wm::dtype::int64, n};
    by_center.group = per;
    by_center.coefs = tc;
    work_out_.apply_scaled_gradients({targets, wm::dtype::int64, nt}, by_center, lr, stream_,
                                     checked);
    work_in_.apply_gradients({centers, wm::dtype::int64, n}, {cg, wm::dtype::float32, n, dim, dim},
                             lr, stream_, checked);
    return;
  }
  const step_totals st = host_step(work_in_, work_out_, centers, targets, n, lr);
  round.loss_units += st.loss_units;
  round.nonfinite += st.nonfinite;
}

epoch_record trainer::run_epoch_blocks(int epoch, const train_callbacks& cb, train_result& result) {
  const std::uint64_t e = static_cast<std::uint64_t>(epoch);
  const int rank = bs_->rank(), ranks = bs_->size(), parts = partitions_;
  const int per_rank = parts / ranks, first_part = rank * per_rank;
  const std::size_t per = static_cast<std::size_t>(s_.negatives) + 1;
  const std::uint64_t batch =
      s_.block_batch > 0 ? s_.block_batch : std::max<std::uint64_t>(1, s_.batch_size / parts);
  // Episodes of equal length, about episode_slots long.
  const std::uint64_t episodes = std::max<std::uint64_t>(
      1, (total_slots_ + episode_slots(s_, nodes_, parts) / 2) / episode_slots(s_, nodes_, parts));
  const double run_slots = static_cast<double>(total_slots_) * s_.epochs;
  std::int64_t loss_sum = 0;
  std::uint64_t pairs = 0;
  bs_->barrier();
  const auto t0 = std::chrono::steady_clock::now();
  // The GPU path groups episode q + 1's pairs on a worker thread (walk_stream_, the other
  // pair set) while episode q's rounds run on stream_, as run_epoch overlaps batches; the
  // exchange (a collective, and the bootstrap's count round) stays on this thread.  A
  // distributed graph's collective walks are not overlapped.
  const bool overlap = s_.use_gpu && !collective_walks();
  auto slots_of = [&](std::uint64_t q) {
    return std::make_pair(total_slots_ * q / episodes, total_slots_ * (q + 1) / episodes);
  };
  auto ta = std::chrono::steady_clock::now();
  grouped_pairs current = group_episode(e, slots_of(0).first, slots_of(0).second, 0);
  result.walk_s += seconds_since(ta);
  for (std::uint64_t q = 0; q < episodes; ++q) {
    const auto [s0, s1] = slots_of(q);
    ta = std::chrono::steady_clock::now();
    exchange_episode(current);
    sync();  // the exchange's time apart from the rounds' (host_exchange_s)
    result.host_exchange_s += seconds_since(ta);
    std::future<grouped_pairs> next;
    const int other = 1 - current.set;
    if (overlap && q + 1 < episodes) {
      next = std::async(std::launch::async, [this, e, other, range = slots_of(q + 1)] {
        wm::set_device(device_);
        return group_episode(e, range.first, range.second, other);
      });
    }
    const std::int64_t* bc = blocks_at_.first;
    const std::int64_t* bt = blocks_at_.second;
    for (int k = 0; k < parts; ++k) {
      step_totals round;
      if (s_.use_gpu) {
        auto* totals =
            static_cast<long long*>(d_totals_.reserve_discard(totals_words * 8, device_));
        const long long init[4] = {0, 0, 0, -1};
        copy_async(totals, init, sizeof(init));
      }
      std::uint64_t round_pairs = 0;
      float lr = s_.lr;
      if (s_.use_gpu && block_events_.empty()) {
        for (int x = 0; x < 4 * per_rank; ++x) block_events_.emplace_back(wm::event_flags::timing);
      }
      auto mark_block = [&](int ii, int phase) {
        if (s_.use_gpu) block_events_[static_cast<std::size_t>(4 * ii + phase)].record(stream_);
      };
      for (int ii = 0; ii < per_rank; ++ii) {
        const int i = first_part + ii, c = (i + k) % parts;
        mark_block(ii, 0);
        auto th = std::chrono::steady_clock::now();
        if (work_in_part_ != i) {
          if (work_in_part_ >= 0) move_partition(input_, work_in_, work_in_part_, true);
          move_partition(input_, work_in_, i, false);
          work_in_part_ = i;
        }
        move_partition(output_, work_out_, c, false);
        mark_block(ii, 1);
        result.host_load_s += seconds_since(th);
        th = std::chrono::steady_clock::now();
        const std::size_t j = static_cast<std::size_t>(ii * parts + c);
        const std::uint64_t first = block_start_[j], count = block_start_[j + 1] - first;
        const std::uint64_t steps = (count + batch - 1) / batch;
        for (std::uint64_t st = 0; st < steps; ++st) {
          // The run's progress in slots at this step: the episode's rounds share its slots
          // evenly, a block's steps share its round.
          const double at = static_cast<double>(e * total_slots_ + s0) +
                            static_cast<double>(s1 - s0) *
                                (k + static_cast<double>(st) / static_cast<double>(steps)) / parts;
          const double decay =
              std::max(static_cast<double>(s_.min_lr_fraction), 1.0 - at / run_slots);
          lr = static_cast<float>(s_.lr * decay);
          const std::uint64_t off = first + st * batch;
          block_step(bc + off, bt + off * per,
                     static_cast<std::size_t>(std::min(batch, first + count - off)), lr,
                     static_cast<std::uint64_t>(at / static_cast<double>(s_.batch_size)), round);
          ++result.steps;
        }
        mark_block(ii, 2);
        result.host_steps_s += seconds_since(th);
        th = std::chrono::steady_clock::now();
        move_partition(output_, work_out_, c, true);
        mark_block(ii, 3);
        result.host_store_s += seconds_since(th);
        round_pairs += count;
      }
      const auto round_end = std::chrono::steady_clock::now();
      if (s_.use_gpu) {
        long long host[4] = {};
        copy_async(host, d_totals_.data(), sizeof(host));
        sync();
        WM_EXPECTS(host[3] == -1, "train: a block's row outside its partition at position "
                                      << static_cast<unsigned long long>(host[3])
                                      << " (a fault of the blocks schedule)");
        round.loss_units = host[0];
        round.nonfinite = static_cast<std::uint64_t>(host[1]);
#if defined(WHOLESTORE_HAS_CUDA)
        for (int ii = 0; ii < per_rank; ++ii) {
          const auto* ev = &block_events_[static_cast<std::size_t>(4 * ii)];
          result.gpu_block_load_s += wm::elapsed_ms(ev[0], ev[1]) / 1e3;
          result.gpu_block_train_s += wm::elapsed_ms(ev[1], ev[2]) / 1e3;
          result.gpu_block_store_s += wm::elapsed_ms(ev[2], ev[3]) / 1e3;
        }
#endif
      }
      loss_sum += round.loss_units;
      pairs += round_pairs;
      // The round's end: every rank's context partition is back in the tables before any
      // rank takes one for the next round (the check's allgather is the barrier), and every
      // rank stops at the same round when the run diverged.
      const std::uint64_t done = s0 + (s1 - s0) * static_cast<std::uint64_t>(k + 1) / parts;
      const std::uint64_t b =
          std::min(steps_per_epoch_, (done + s_.batch_size - 1) / s_.batch_size);
      check_step(epoch, b > 0 ? b - 1 : 0, lr, round, round_pairs);
      result.host_round_end_s += seconds_since(round_end);
      if (cb.step) {
        cb.step(
            epoch + 1, b, steps_per_epoch_,
            pairs ? static_cast<double>(loss_sum) / loss_unit / static_cast<double>(pairs) : 0.0);
      }
    }
    result.step_s += seconds_since(ta);
    if (q + 1 < episodes) {
      ta = std::chrono::steady_clock::now();
      current = next.valid()
                    ? next.get()
                    : group_episode(e, slots_of(q + 1).first, slots_of(q + 1).second, other);
      result.walk_s += seconds_since(ta);
    }
  }
  if (work_in_part_ >= 0) move_partition(input_, work_in_, work_in_part_, true);
  work_in_part_ = -1;
  sync();
  bs_->barrier();  // every partition is back before evaluation reads the tables
  // The tables' step counters as the global schedule leaves them (checkpoints record them).
  input_.set_step((e + 1) * steps_per_epoch_);
  output_.set_step((e + 1) * steps_per_epoch_);
  const double secs = seconds_since(t0);
  result.train_s += secs;
  return epoch_totals(epoch, loss_sum, pairs, secs, result);
}

}  // namespace wholestore::train::detail
