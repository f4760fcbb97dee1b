// One training step on a batch's pairs (trainer::step, trainer_impl.hpp): lookups, SGNS
// gradients and both tables' updates, on the CPU or on the GPU's streams, and the CUDA stream,
// event and copy helpers the GPU path uses.
#include "trainer_impl.hpp"

#include <embedding/sgns.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

namespace wholestore::train::detail {

trainer::step_totals trainer::step(float lr, const std::function<void()>& while_running) {
  if (s_.use_gpu) return step_gpu(lr, while_running);
  while_running();
  return host_step(input_, output_, centers_.data(), targets_.data(), n_pairs_, lr);
}

trainer::step_totals trainer::host_step(embedding::table& in, embedding::table& out,
                                        const std::int64_t* centers, const std::int64_t* targets,
                                        std::size_t n, float lr) {
  const std::size_t nt = n * (static_cast<std::size_t>(s_.negatives) + 1);
  const std::size_t dim = s_.dim;
  center_rows_.resize(n * dim);
  target_rows_.resize(nt * dim);
  center_grads_.resize(n * dim);
  target_grads_.resize(nt * dim);
  in.lookup_host({centers, wm::dtype::int64, n},
                 {center_rows_.data(), wm::dtype::float32, n, dim, dim}, s_.threads);
  out.lookup_host({targets, wm::dtype::int64, nt},
                  {target_rows_.data(), wm::dtype::float32, nt, dim, dim}, s_.threads);
  long long units = 0;
  unsigned long long nonfinite = 0;
  embedding::sgns_batch b{center_rows_.data(),  target_rows_.data(),  n,      s_.negatives, dim,
                          center_grads_.data(), target_grads_.data(), nullptr};
  b.loss_units = &units;
  b.nonfinite_pairs = &nonfinite;
  b.loss_scale = loss_unit;
  embedding::sgns_gradients_host(b, s_.threads);
  in.apply_gradients_host({centers, wm::dtype::int64, n},
                          {center_grads_.data(), wm::dtype::float32, n, dim, dim}, lr, s_.threads);
  out.apply_gradients_host({targets, wm::dtype::int64, nt},
                           {target_grads_.data(), wm::dtype::float32, nt, dim, dim}, lr,
                           s_.threads);
  return {units, nonfinite};
}

trainer::step_totals trainer::step_gpu(float lr, const std::function<void()>& while_running) {
  const std::size_t n = n_pairs_, per_pair = static_cast<std::size_t>(s_.negatives) + 1;
  const std::size_t nt = n * per_pair, dim = s_.dim;
  const bool by_reference = output_by_reference();
  // assemble() left the indices in pair set use_, on assembly_stream_.
  auto* ci = d_centers_[use_].data_as<std::int64_t>();
  auto* ti = d_targets_[use_].data_as<std::int64_t>();
  wait_event(stream_, pairs_ready_[use_]);
  auto* cg = static_cast<float*>(d_center_grads_.reserve_discard((n + 1) * dim * 4, device_));
  float* tg = nullptr;
  float* tc = nullptr;
  if (by_reference) {
    tc = static_cast<float*>(d_target_coefs_.reserve_discard((nt + 1) * 4, device_));
  } else {
    tg = static_cast<float*>(d_target_grads_.reserve_discard((nt + 1) * dim * 4, device_));
  }
  // Words 0-2: this rank's loss units, pairs with non-finite scores, pairs; word 3: the first
  // bad row position (~0: none); words 4-6: words 0-2 summed over the ranks (on_device_totals).
  auto* totals = static_cast<long long*>(d_totals_.reserve_discard(totals_words * 8, device_));
  const long long init[4] = {0, 0, static_cast<long long>(n), -1};
  // From pageable memory: staged at once, no wait for the stream.
  copy_async(totals, init, sizeof(init));
  embedding::sgns_batch b{nullptr, nullptr, n, s_.negatives, dim, cg, tg, nullptr};
  b.loss_units = totals;
  b.nonfinite_pairs = reinterpret_cast<unsigned long long*>(totals + 1);
  b.loss_scale = loss_unit;
  b.target_coefs = tc;
  mark(0);
  if (s_.table_type != wm::memory_type::distributed) {
    mark(1);
    embedding::sgns_table_batch tb;
    tb.input = input_.view(device_);
    tb.output = output_.view(device_);
    tb.center_rows = ci;
    tb.target_rows = ti;
    tb.out = b;
    tb.first_bad = reinterpret_cast<unsigned long long*>(totals + 3);
    embedding::sgns_gradients_from_tables(tb, stream_);
  } else {
    auto* cr = static_cast<float*>(d_center_rows_.reserve_discard((n + 1) * dim * 4, device_));
    auto* tr = static_cast<float*>(d_target_rows_.reserve_discard((nt + 1) * dim * 4, device_));
    input_.lookup({ci, wm::dtype::int64, n}, {cr, wm::dtype::float32, n, dim, dim}, stream_);
    output_.lookup({ti, wm::dtype::int64, nt}, {tr, wm::dtype::float32, nt, dim, dim}, stream_);
    mark(1);
    b.centers = cr;
    b.targets = tr;
    embedding::sgns_gradients(b, stream_);
  }
  mark(2);
  // The tables check their indices on the device into the same word and skip their updates
  // once it is set, so nothing waits before the loss comes back.
  embedding::apply_options checked;
  checked.deferred_check = reinterpret_cast<unsigned long long*>(totals + 3);
  // One rank: the input table's call runs on its own stream from here, beside the output
  // table's; only its row writes wait for the output update (which reads the input rows by
  // reference).  Several ranks keep one stream: both calls exchange over one communicator,
  // and collectives on two streams could interleave differently on different ranks.
  const bool side = bs_->size() == 1;
  cudaStream_t input_stream = side ? input_stream_ : stream_;
  if (side) {
    record_event(sgns_done_, stream_);
    wait_event(input_stream_, sgns_done_);
  }
  if (by_reference) {
    embedding::scaled_rows by_center;
    by_center.source = &input_;
    by_center.source_rows = {ci, wm::dtype::int64, n};
    by_center.group = per_pair;
    by_center.coefs = tc;
    output_.apply_scaled_gradients({ti, wm::dtype::int64, nt}, by_center, lr, stream_, checked);
  } else {
    output_.apply_gradients({ti, wm::dtype::int64, nt}, {tg, wm::dtype::float32, nt, dim, dim}, lr,
                            stream_, checked);
  }
  mark(3);
  embedding::apply_options after_output = checked;
  if (side) {
    record_event(output_done_, stream_);
    after_output.update_after = output_done_;
  }
  input_.apply_gradients({ci, wm::dtype::int64, n}, {cg, wm::dtype::float32, n, dim, dim}, lr,
                         input_stream, after_output);
  if (side) {
    record_event(input_done_, input_stream_);
    wait_event(stream_, input_done_);
  }
  mark(4);
  record_event(pairs_free_[use_], stream_);  // the next assemble into this set may write
  // Several ranks over NCCL: the step's totals summed on the stream, which is also the step's
  // fence (no rank's next lookups start before every rank's updates are done) and replaces the
  // bootstrap round check_step makes otherwise.
  const bool on_device = on_device_totals();
  if (on_device) comm_->allreduce_sum_agreed(totals, totals + 4, 3, wm::dtype::int64, stream_);
  while_running();
  long long host_totals[totals_words] = {};
  copy_async(host_totals, totals, sizeof(host_totals));
  sync();
  add_phase_times();
  // The fused read and the tables' deferred checks share the word; the SGNS step reads
  // every center and target before either update, so a bad row stops both updates.
  WM_EXPECTS(host_totals[3] == -1,
             "train: a row index outside its table at position "
                 << static_cast<unsigned long long>(host_totals[3])
                 << " of the batch's pairs; neither table was changed by this batch");
  step_totals out{host_totals[0], static_cast<std::uint64_t>(host_totals[1])};
  if (on_device) {
    out.summed = true;
    out.all_loss_units = host_totals[4];
    out.all_nonfinite = static_cast<std::uint64_t>(host_totals[5]);
    out.all_pairs = static_cast<std::uint64_t>(host_totals[6]);
  }
  return out;
}

void trainer::mark(int i) {
  if (events_[i].value() == nullptr) events_[i] = wm::cuda_event(wm::event_flags::timing);
  events_[i].record(stream_);  // nothing in a build without CUDA
}

void trainer::add_phase_times() {
#if defined(WHOLESTORE_HAS_CUDA)
  for (int i = 0; i < phases; ++i) phase_s_[i] += wm::elapsed_ms(events_[i], events_[i + 1]) / 1e3;
#endif
}

void trainer::copy_async(void* dst, const void* src, std::size_t bytes) {
  copy_on(stream_, dst, src, bytes);
}

void trainer::copy_on(cudaStream_t stream, void* dst, const void* src, std::size_t bytes) {
#if defined(WHOLESTORE_HAS_CUDA)
  if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream) != cudaSuccess)
    WM_FAIL(wm::cuda_error, "train: cudaMemcpyAsync of " << bytes << " bytes failed");
#else
  (void)stream;
  wm::copy_bytes(dst, src, bytes);
#endif
}

void trainer::record_event(wm::cuda_event& e, cudaStream_t stream) {
  if (e.value() == nullptr) e = wm::cuda_event(wm::event_flags::disable_timing);
  e.record(stream);  // nothing in a build without CUDA
}

void trainer::wait_event(cudaStream_t stream, const wm::cuda_event& e) {
  if (e.value() != nullptr) e.wait(stream);
}

void trainer::sync() {
#if defined(WHOLESTORE_HAS_CUDA)
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess)
    WM_FAIL(wm::cuda_error, "train: the GPU stream failed");
#endif
}

}  // namespace wholestore::train::detail
