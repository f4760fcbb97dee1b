/*
 * The NCCL backend of communicator.
 *
 * Creation is non-blocking (config.blocking = 0): ncclCommInitRankConfig returns
 * ncclInProgress and ncclCommGetAsyncError is polled with the bootstrap's timeout, so a dead or
 * absent peer ends in timeout_error (and an aborted communicator) instead of a hang.
 *
 * Collectives then run on a blocking child of that communicator (ncclCommSplit with
 * config.blocking = 1, polled the same way).  NCCL launches every group of a non-blocking
 * communicator from a thread it creates for that group, which cost about 50-150 us of host time per
 * collective on two H200s; a distributed sampler or walker enqueues several a batch.  A
 * blocking enqueue waits for no peer once the connections exist (NCCL makes them at a pair's
 * first collective), and synchronize() still polls the stream with the timeout and aborts.
 * What could block inside NCCL (a first connection, finalize) runs under a watchdog: past the
 * timeout it reports the call and rank on stderr and ends the process, since a thread stuck in
 * NCCL cannot be unwound.  WHOLESTORE_NCCL_NONBLOCKING=1 (the same on every rank) keeps the
 * non-blocking communicator for everything, each enqueue polled as creation is.
 *
 * Argument checks: before each collective (unless WHOLESTORE_CHECK_COLLECTIVES=0, which every
 * rank must agree on) the ranks allgather a small descriptor of the call over the bootstrap
 * (sequence number, operation, dtype, count, root; for alltoallv also every rank's send and
 * receive counts) and throw mismatch_error on every rank when they disagree.  This costs one
 * bootstrap round trip per collective, so it can be turned off for speed.
 *
 * NVLink SHARP (NVLS) stays off on the GPU machines (NCCL_NVLS_ENABLE=0 is set outside); this
 * file neither sets NCCL environment variables nor creates multicast objects.
 */
#include "collective_step.hpp"
#include "cuda_memory.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/interrupt.hpp>
#include <wholememory/log.hpp>

#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace wholememory {
namespace {

using clock_type = std::chrono::steady_clock;

enum class op_code : std::int32_t {
  barrier = 1,
  broadcast = 2,
  allgather = 3,
  alltoallv = 4,
  allreduce_sum = 5,
};

const char* op_name(std::int32_t op) {
  switch (static_cast<op_code>(op)) {
    case op_code::barrier:
      return "barrier";
    case op_code::broadcast:
      return "broadcast";
    case op_code::allgather:
      return "allgather";
    case op_code::alltoallv:
      return "alltoallv";
    case op_code::allreduce_sum:
      return "allreduce_sum";
  }
  return "unknown";
}

/// What every rank says about the collective it is about to enqueue.
struct call_descriptor {
  std::uint64_t seq;
  std::int32_t op;
  std::int32_t type;  // dtype, -1 when the operation has none
  std::uint64_t count;
  std::int32_t root;  // -1 when the operation has none
  std::int32_t unused;
};

std::string describe(const call_descriptor& d) {
  std::ostringstream os;
  os << op_name(d.op) << " #" << d.seq << "(";
  if (d.type >= 0) os << "dtype=" << dtype_name(static_cast<dtype>(d.type)) << ", ";
  os << "count=" << d.count;
  if (d.root >= 0) os << ", root=" << d.root;
  os << ")";
  return os.str();
}

/// WHOLESTORE_NCCL_NONBLOCKING: 0 when unset or "0", 1 for "1", -1 for any other value (which
/// travels with the settings so that every rank throws, naming it).
int nonblocking_from_env() {
  const char* value = std::getenv("WHOLESTORE_NCCL_NONBLOCKING");
  if (value == nullptr || std::strcmp(value, "0") == 0) return 0;
  return std::strcmp(value, "1") == 0 ? 1 : -1;
}

bool checks_from_env() {
  const char* value = std::getenv("WHOLESTORE_CHECK_COLLECTIVES");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

/// NCCL's type for arithmetic (allreduce): every dtype but int16.
ncclDataType_t nccl_arith_type(dtype t) {
  switch (t) {
    case dtype::int8:
      return ncclInt8;
    case dtype::uint8:
      return ncclUint8;
    case dtype::int32:
      return ncclInt32;
    case dtype::int64:
      return ncclInt64;
    case dtype::float16:
      return ncclFloat16;
    case dtype::bfloat16:
      return ncclBfloat16;
    case dtype::float32:
      return ncclFloat32;
    case dtype::float64:
      return ncclFloat64;
    case dtype::int16:
      WM_FAIL(logic_error,
              "NCCL has no int16; allreduce of int16 is not supported by the NCCL backend "
              "(use int32, or the host backend)");
  }
  WM_FAIL(logic_error, "unknown dtype value " << static_cast<int>(t));
}

/// Type and count for operations that only move data: int16 travels as twice as many bytes.
struct wire_format {
  ncclDataType_t type;
  std::size_t count;
};

wire_format nccl_move_format(dtype t, std::size_t count) {
  if (t == dtype::int16) return {ncclInt8, count * 2};
  return {nccl_arith_type(t), count};
}

/// The pause between two polls of a wait that began at `since`: yields for its first 500 µs,
/// then sleeps 20 µs at a time, and 200 µs once it has lasted 50 ms.  Most waits (a stream
/// reaching a count exchange, NCCL enqueueing a group) end within tens of microseconds; a
/// sleep there would cost its timer slack (~50 µs on Linux) on every wait, and the waits of
/// a distributed sampler or walker come several to a batch.
void backoff(clock_type::time_point since) {
  const auto waited = clock_type::now() - since;
  if (waited < std::chrono::microseconds(500)) {
    std::this_thread::yield();
  } else if (waited < std::chrono::milliseconds(50)) {
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class nccl_communicator final : public communicator {
 public:
  nccl_communicator(std::shared_ptr<bootstrap> bs, rank_topology topology, int device, bool checks,
                    bool blocking)
      : communicator(std::move(bs), std::move(topology)),
        device_(device),
        checks_(checks),
        blocking_(blocking) {}

  ~nccl_communicator() override {
    destroy();
    stop_watchdog();
  }

  bool broken() const override {
    return aborted_.load(std::memory_order_acquire) || bootstrap_->broken();
  }

  /// Creates the NCCL communicator.  Collective.
  void init() {
    const char* what = "creating the NCCL communicator";
    ncclUniqueId id{};
    detail::collective_step(*bootstrap_, what, [&] {
      barrier_owner_ = detail::allocate_device_buffer(sizeof(std::int32_t), device_, &barrier_buf_);
      device_guard guard(device_);
      WM_CUDA_TRY(cudaMemset(barrier_buf_, 0, sizeof(std::int32_t)));
      WM_CUDA_TRY(cudaDeviceSynchronize());
      if (rank() == 0) WM_NCCL_TRY(ncclGetUniqueId(&id));
    });
    bootstrap_->broadcast(&id, sizeof(id), 0);
    try {
      init_rank(id, what);
    } catch (...) {
      // Some rank failed: finalizing would wait for it, so abort at once.
      abort_comm();
      throw;
    }
  }

  backend get_backend() const override { return backend::nccl; }
  int device() const override { return device_; }

  void barrier(cudaStream_t stream) override {
    check_call(op_code::barrier, -1, 0, -1);
    device_guard guard(device_);
    // A max-reduction of one element: the value never grows, and every rank waits for all.
    enqueued(watched("ncclAllReduce (barrier)",
                     [&] {
                       return ncclAllReduce(barrier_buf_, barrier_buf_, 1, ncclInt32, ncclMax,
                                            comm_, stream);
                     }),
             "ncclAllReduce (barrier)");
  }

  void broadcast(void* buffer, std::size_t count, dtype type, int root,
                 cudaStream_t stream) override {
    check_call(op_code::broadcast, static_cast<int>(type), count, root);
    WM_EXPECTS(root >= 0 && root < size(),
               "broadcast root " << root << " is not a rank of this communicator of " << size());
    if (count == 0) return;
    WM_EXPECTS(buffer != nullptr, "broadcast of " << count << " elements needs a buffer");
    wire_format wire = nccl_move_format(type, count);
    device_guard guard(device_);
    enqueued(watched("ncclBroadcast",
                     [&] {
                       return ncclBroadcast(buffer, buffer, wire.count, wire.type, root, comm_,
                                            stream);
                     }),
             "ncclBroadcast");
  }

  void allgather(const void* send, void* recv, std::size_t count, dtype type,
                 cudaStream_t stream) override {
    allgather_impl(send, recv, count, type, stream, true);
  }

  void allgather_agreed(const void* send, void* recv, std::size_t count, dtype type,
                        cudaStream_t stream) override {
    allgather_impl(send, recv, count, type, stream, false);
  }

  void allgather_impl(const void* send, void* recv, std::size_t count, dtype type,
                      cudaStream_t stream, bool check) {
    check_call(op_code::allgather, static_cast<int>(type), count, -1, nullptr, nullptr, check);
    if (count == 0) return;
    WM_EXPECTS(send != nullptr && recv != nullptr,
               "allgather of " << count << " elements needs send and receive buffers");
    wire_format wire = nccl_move_format(type, count);
    device_guard guard(device_);
    enqueued(
        watched("ncclAllGather",
                [&] { return ncclAllGather(send, recv, wire.count, wire.type, comm_, stream); }),
        "ncclAllGather");
  }

  void alltoallv(const void* send, const std::size_t* send_counts, const std::size_t* send_displs,
                 void* recv, const std::size_t* recv_counts, const std::size_t* recv_displs,
                 dtype type, cudaStream_t stream) override {
    alltoallv_impl(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream,
                   true);
  }

  void alltoallv_agreed(const void* send, const std::size_t* send_counts,
                        const std::size_t* send_displs, void* recv, const std::size_t* recv_counts,
                        const std::size_t* recv_displs, dtype type, cudaStream_t stream) override {
    alltoallv_impl(send, send_counts, send_displs, recv, recv_counts, recv_displs, type, stream,
                   false);
  }

  void alltoallv_impl(const void* send, const std::size_t* send_counts,
                      const std::size_t* send_displs, void* recv, const std::size_t* recv_counts,
                      const std::size_t* recv_displs, dtype type, cudaStream_t stream, bool check) {
    WM_EXPECTS(send_counts != nullptr && send_displs != nullptr && recv_counts != nullptr &&
                   recv_displs != nullptr,
               "alltoallv needs send and receive counts and displacements (" << size() << " each)");
    check_call(op_code::alltoallv, static_cast<int>(type), 0, -1, send_counts, recv_counts, check);
    const std::size_t element = dtype_size(type);
    const int me = rank();
    device_guard guard(device_);
    if (send_counts[me] > 0) {
      WM_EXPECTS(send_counts[me] == recv_counts[me],
                 "alltoallv: rank " << me << " sends " << send_counts[me]
                                    << " elements to itself but expects " << recv_counts[me]);
      WM_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(recv) + recv_displs[me] * element,
                                  static_cast<const char*>(send) + send_displs[me] * element,
                                  send_counts[me] * element, cudaMemcpyDeviceToDevice, stream));
    }
    WM_NCCL_TRY(ncclGroupStart());
    ncclResult_t first_error = ncclSuccess;
    const char* failed_call = "";
    for (int j = 0; j < size() && first_error == ncclSuccess; ++j) {
      if (j == me) continue;
      if (send_counts[j] > 0) {
        wire_format wire = nccl_move_format(type, send_counts[j]);
        first_error = ncclSend(static_cast<const char*>(send) + send_displs[j] * element,
                               wire.count, wire.type, j, comm_, stream);
        failed_call = "ncclSend";
      }
      if (first_error == ncclSuccess && recv_counts[j] > 0) {
        wire_format wire = nccl_move_format(type, recv_counts[j]);
        first_error = ncclRecv(static_cast<char*>(recv) + recv_displs[j] * element, wire.count,
                               wire.type, j, comm_, stream);
        failed_call = "ncclRecv";
      }
    }
    ncclResult_t end = watched("ncclGroupEnd (alltoallv)", [] { return ncclGroupEnd(); });
    if (first_error != ncclSuccess) enqueued(first_error, failed_call);
    enqueued(end, "ncclGroupEnd (alltoallv)");
  }

  void allreduce_sum(const void* send, void* recv, std::size_t count, dtype type,
                     cudaStream_t stream) override {
    allreduce_sum_impl(send, recv, count, type, stream, true);
  }

  void allreduce_sum_agreed(const void* send, void* recv, std::size_t count, dtype type,
                            cudaStream_t stream) override {
    allreduce_sum_impl(send, recv, count, type, stream, false);
  }

  void allreduce_sum_impl(const void* send, void* recv, std::size_t count, dtype type,
                          cudaStream_t stream, bool check) {
    check_call(op_code::allreduce_sum, static_cast<int>(type), count, -1, nullptr, nullptr, check);
    ncclDataType_t nccl_type = nccl_arith_type(type);
    if (count == 0) return;
    WM_EXPECTS(send != nullptr && recv != nullptr,
               "allreduce of " << count << " elements needs send and receive buffers");
    device_guard guard(device_);
    enqueued(watched("ncclAllReduce",
                     [&] {
                       return ncclAllReduce(send, recv, count, nccl_type, ncclSum, comm_, stream);
                     }),
             "ncclAllReduce");
  }

  void synchronize(cudaStream_t stream) override {
    expect_alive();
    device_guard guard(device_);
    const auto deadline = clock_type::now() + timeout();
    for (const auto since = clock_type::now();; backoff(since)) {
      cudaError_t query = cudaStreamQuery(stream);
      throw_on_async_error("synchronize");
      if (query == cudaSuccess) return;
      if (query != cudaErrorNotReady) {
        cudaGetLastError();
        abort_comm();
        WM_FAIL(cuda_error, "cudaStreamQuery in synchronize failed: "
                                << cuda_error_text(query) << "; the NCCL communicator was aborted");
      }
      if (interrupt_requested()) {
        abort_comm();
        WM_FAIL(interrupted_error, "NCCL collectives on rank "
                                       << rank()
                                       << " were interrupted before they completed; the NCCL "
                                          "communicator was aborted");
      }
      if (clock_type::now() > deadline) {
        abort_comm();
        WM_FAIL(timeout_error, "NCCL collectives on rank "
                                   << rank() << " did not complete within " << timeout().count()
                                   << " ms: a peer died or did not call the same collective "
                                      "(WHOLESTORE_TIMEOUT sets the limit); the NCCL communicator "
                                      "was aborted");
      }
    }
  }

  std::shared_ptr<communicator> split(int color, int key) override {
    std::unique_ptr<bootstrap> sub = bootstrap_->split(color, key);
    if (!sub) return nullptr;
    return make_nccl_communicator(std::shared_ptr<bootstrap>(std::move(sub)), device_);
  }

 private:
  /// Joins the NCCL communicator with the broadcast id.  Collective.
  void init_rank(const ncclUniqueId& id, const char* what) {
    detail::collective_step(*bootstrap_, what, [&] {
      device_guard guard(device_);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      ncclResult_t res = ncclCommInitRankConfig(&comm_, size(), id, rank(), &config);
      if (res != ncclSuccess && res != ncclInProgress) {
        std::string last_error = comm_ != nullptr ? ncclGetLastError(comm_) : "";
        abort_comm();
        WM_FAIL(nccl_error, "ncclCommInitRankConfig(rank "
                                << rank() << " of " << size() << ", device " << device_
                                << ") failed: " << ncclGetErrorString(res)
                                << (last_error.empty() ? "" : ": ") << last_error);
      }
      wait_ready("ncclCommInitRankConfig");
    });
    if (!blocking_) return;
    ncclComm_t child = nullptr;
    detail::collective_step(*bootstrap_, what, [&] {
      device_guard guard(device_);
      child = split_blocking_child();
    });
    // Every rank uses the child or none does (collectives must meet on one communicator).
    const int mine = child != nullptr ? 1 : 0;
    std::vector<int> all(size());
    bootstrap_->allgather(&mine, all.data(), sizeof(int));
    const bool everyone = std::find(all.begin(), all.end(), 0) == all.end();
    if (!everyone) {
      if (child != nullptr) ncclCommAbort(child);
      blocking_ = false;
      WM_LOG(log_level::warn,
             "the blocking NCCL communicator could not be made on every rank; "
             "collectives stay on the non-blocking one (slower enqueues)");
      return;
    }
    ncclComm_t parent = comm_;
    comm_ = child;
    retire(parent, false);
    start_watchdog();
  }

  /// A blocking child of the (non-blocking) communicator over all its ranks, the split polled
  /// with the timeout; nullptr when NCCL finished the split without giving one.  Collective.
  ncclComm_t split_blocking_child() {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    ncclComm_t child = nullptr;
    const ncclResult_t res = ncclCommSplit(comm_, 0, rank(), &child, &config);
    if (res != ncclSuccess && res != ncclInProgress) {
      // Refused outright: the parent serves on (init_rank falls back on every rank).
      WM_LOG(log_level::warn, "ncclCommSplit (blocking communicator) on rank "
                                  << rank() << " failed: " << ncclGetErrorString(res));
      throw_on_async_error("ncclCommSplit (blocking communicator)");
      if (child != nullptr) ncclCommAbort(child);
      return nullptr;
    }
    // A non-blocking parent splits in the background and stores the child only when the split
    // is complete: poll the parent, then the child, until neither is in progress, with the
    // bootstrap's timeout.
    const auto deadline = clock_type::now() + timeout();
    clock_type::time_point parent_done_at{};
    for (const auto since = clock_type::now();; backoff(since)) {
      ncclResult_t parent_state = ncclSuccess, child_state = ncclInProgress;
      ncclCommGetAsyncError(comm_, &parent_state);
      const ncclComm_t made = __atomic_load_n(&child, __ATOMIC_ACQUIRE);
      if (made != nullptr) ncclCommGetAsyncError(made, &child_state);
      if (parent_state == ncclSuccess && child_state == ncclSuccess) return made;
      // The parent done for a second and still no child: NCCL gave none.
      if (parent_state == ncclSuccess && made == nullptr) {
        if (parent_done_at == clock_type::time_point{}) parent_done_at = clock_type::now();
        if (clock_type::now() - parent_done_at > std::chrono::seconds(1)) return nullptr;
      }
      auto failed_state = [](ncclResult_t r) { return r != ncclSuccess && r != ncclInProgress; };
      if (!failed_state(parent_state) && failed_state(child_state)) {
        WM_LOG(log_level::warn, "the blocking NCCL communicator failed on rank "
                                    << rank() << ": " << ncclGetErrorString(child_state));
        ncclCommAbort(made);
        return nullptr;
      }
      const ncclResult_t failed = failed_state(parent_state) ? parent_state : ncclSuccess;
      const bool late = clock_type::now() > deadline;
      const bool interrupted = interrupt_requested();
      if (failed == ncclSuccess && !late && !interrupted) continue;
      if (made != nullptr) ncclCommAbort(made);
      abort_comm();
      if (failed != ncclSuccess) {
        WM_FAIL(nccl_error,
                "ncclCommSplit (blocking communicator) failed: " << ncclGetErrorString(failed));
      }
      if (interrupted) {
        WM_FAIL(interrupted_error, "creating the NCCL communicator on rank "
                                       << rank() << " was interrupted; it was aborted");
      }
      WM_FAIL(timeout_error, "ncclCommSplit (blocking communicator) on rank "
                                 << rank() << " did not finish within " << timeout().count()
                                 << " ms: a peer died or did not take part (WHOLESTORE_TIMEOUT "
                                    "sets the limit); the NCCL communicator was aborted");
    }
  }

  /// Runs an NCCL call that may block under the watchdog (blocking communicator only).
  template <typename Call>
  ncclResult_t watched(const char* what, Call call) {
    if (!blocking_) return call();
    watch_what_.store(what, std::memory_order_relaxed);
    watch_since_.store(clock_type::now().time_since_epoch().count(), std::memory_order_release);
    const ncclResult_t res = call();
    watch_since_.store(0, std::memory_order_release);
    return res;
  }

  /// The watchdog thread: wakes every 50 ms; a watched call older than the timeout ends the
  /// process with a message naming it.
  void start_watchdog() {
    watchdog_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(watchdog_mutex_);
      while (!watchdog_stop_) {
        watchdog_cv_.wait_for(lock, std::chrono::milliseconds(50));
        const auto since = watch_since_.load(std::memory_order_acquire);
        if (since == 0) continue;
        const auto started = clock_type::time_point(clock_type::duration(since));
        if (clock_type::now() - started <= timeout()) continue;
        std::fprintf(stderr,
                     "wholestore: %s on rank %d has not returned within %lld ms: a peer stopped "
                     "or died while NCCL waited for it (WHOLESTORE_TIMEOUT sets the limit); a "
                     "thread blocked in NCCL cannot be unwound, so this process exits\n",
                     watch_what_.load(std::memory_order_relaxed), rank(),
                     static_cast<long long>(timeout().count()));
        std::fflush(stderr);
        ::_exit(124);
      }
    });
  }

  void stop_watchdog() noexcept {
    if (!watchdog_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(watchdog_mutex_);
      watchdog_stop_ = true;
    }
    watchdog_cv_.notify_all();
    watchdog_.join();
  }

  void expect_alive() const {
    WM_EXPECTS(comm_ != nullptr,
               "the NCCL communicator was aborted after an earlier error (timeout or NCCL "
               "failure); create a new one");
  }

  /// Agrees with every rank on the collective about to be enqueued; mismatch_error on every
  /// rank when they disagree.  `check` false (the *_agreed calls): the sequence number moves
  /// on, the round is left out.
  void check_call(op_code op, int type, std::size_t count, int root,
                  const std::size_t* send_counts = nullptr,
                  const std::size_t* recv_counts = nullptr, bool check = true) {
    expect_alive();
    const std::uint64_t seq = seq_++;
    if (!checks_ || !check) return;
    const int n = size();
    call_descriptor mine{};
    mine.seq = seq;
    mine.op = static_cast<std::int32_t>(op);
    mine.type = type;
    mine.count = count;
    mine.root = root;
    std::vector<call_descriptor> all(n);
    bootstrap_->allgather(&mine, all.data(), sizeof(call_descriptor));
    bool agree = true;
    for (int r = 1; r < n; ++r) {
      agree = agree && all[r].seq == all[0].seq && all[r].op == all[0].op &&
              all[r].type == all[0].type && all[r].count == all[0].count &&
              all[r].root == all[0].root;
    }
    if (!agree) {
      std::ostringstream os;
      os << "ranks called different NCCL collectives:";
      for (int r = 0; r < n; ++r) os << (r ? "," : "") << " rank " << r << " " << describe(all[r]);
      WM_FAIL(mismatch_error, os.str());
    }
    if (op != op_code::alltoallv) return;

    // Row r of `rows`: rank r's send counts, then its receive counts.
    std::vector<std::uint64_t> my_row(2 * static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      my_row[j] = send_counts[j];
      my_row[n + j] = recv_counts[j];
    }
    std::vector<std::uint64_t> rows(2 * static_cast<std::size_t>(n) * n);
    bootstrap_->allgather(my_row.data(), rows.data(), my_row.size() * sizeof(std::uint64_t));
    std::ostringstream os;
    int mismatches = 0;
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) {
        const std::uint64_t sent = rows[2 * std::size_t(n) * i + j];
        const std::uint64_t expected = rows[2 * std::size_t(n) * j + n + i];
        if (sent == expected) continue;
        if (mismatches++ < 8) {
          os << (mismatches > 1 ? "; " : " ") << "rank " << i << " sends " << sent
             << " elements to rank " << j << ", which expects " << expected;
        }
      }
    }
    if (mismatches > 0) {
      WM_FAIL(mismatch_error,
              "alltoallv #" << seq << " counts disagree (" << mismatches << " pairs):" << os.str());
    }
  }

  /// Handles the result of an enqueueing NCCL call on the non-blocking communicator.
  void enqueued(ncclResult_t res, const char* call) {
    if (res == ncclSuccess) return;
    if (res == ncclInProgress) {
      wait_ready(call);
      return;
    }
    throw_on_async_error(call);
    std::string last_error = comm_ != nullptr ? ncclGetLastError(comm_) : "";
    WM_FAIL(nccl_error, call << " failed: " << ncclGetErrorString(res)
                             << (last_error.empty() ? "" : ": ") << last_error);
  }

  /// Polls until the communicator leaves ncclInProgress; aborts it and throws on an error or
  /// when the bootstrap's timeout passes.
  void wait_ready(const char* call) {
    const auto deadline = clock_type::now() + timeout();
    for (const auto since = clock_type::now();; backoff(since)) {
      ncclResult_t state = ncclInProgress;
      ncclResult_t res = ncclCommGetAsyncError(comm_, &state);
      if (res != ncclSuccess) {
        abort_comm();
        WM_FAIL(nccl_error,
                "ncclCommGetAsyncError after " << call << " failed: " << ncclGetErrorString(res));
      }
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) throw_state(state, call);
      if (interrupt_requested()) {
        abort_comm();
        WM_FAIL(interrupted_error, call << " on rank " << rank()
                                        << " was interrupted; the NCCL communicator was aborted");
      }
      if (clock_type::now() > deadline) {
        abort_comm();
        WM_FAIL(timeout_error, call << " on rank " << rank() << " did not finish within "
                                    << timeout().count()
                                    << " ms: a peer died or did not take part "
                                       "(WHOLESTORE_TIMEOUT sets the limit); the NCCL "
                                       "communicator was aborted");
      }
    }
  }

  /// Throws (after aborting) when the communicator reports an asynchronous error.
  void throw_on_async_error(const char* call) {
    if (comm_ == nullptr) return;
    ncclResult_t state = ncclSuccess;
    ncclResult_t res = ncclCommGetAsyncError(comm_, &state);
    if (res != ncclSuccess) {
      abort_comm();
      WM_FAIL(nccl_error,
              "ncclCommGetAsyncError in " << call << " failed: " << ncclGetErrorString(res));
    }
    if (state != ncclSuccess && state != ncclInProgress) throw_state(state, call);
  }

  [[noreturn]] void throw_state(ncclResult_t state, const char* call) {
    std::string last_error = comm_ != nullptr ? ncclGetLastError(comm_) : "";
    abort_comm();
    if (state == ncclRemoteError) {
      WM_FAIL(timeout_error, call << " on rank " << rank()
                                  << ": a peer failed or died (NCCL remote error"
                                  << (last_error.empty() ? "" : ": ") << last_error
                                  << "); the NCCL communicator was aborted");
    }
    WM_FAIL(nccl_error, call << " failed asynchronously: " << ncclGetErrorString(state)
                             << (last_error.empty() ? "" : ": ") << last_error
                             << "; the NCCL communicator was aborted");
  }

  void abort_comm() noexcept {
    if (comm_ == nullptr) return;
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaSetDevice(device_);
    ncclResult_t res = ncclCommAbort(comm_);
    if (res != ncclSuccess) {
      WM_LOG(log_level::warn, "ncclCommAbort failed: " << ncclGetErrorString(res));
    }
    comm_ = nullptr;
    aborted_.store(true, std::memory_order_release);
    if (previous >= 0) cudaSetDevice(previous);
    cudaGetLastError();
  }

  /// Finalizes and destroys the communicator; aborts it when that fails.  The blocking one is
  /// aborted at once when the bootstrap saw a peer fail (finalizing would wait for it).
  void destroy() noexcept {
    if (comm_ == nullptr) return;
    if (blocking_ && bootstrap_->broken()) {
      abort_comm();
      return;
    }
    ncclComm_t c = comm_;
    comm_ = nullptr;
    if (!retire(c, blocking_)) aborted_.store(true, std::memory_order_release);
  }

  /// Finalizes (the non-blocking one polled with the timeout, the blocking one under the
  /// watchdog) and destroys `c`, or aborts it when that fails.  Whether it ended cleanly.
  bool retire(ncclComm_t c, bool blocking_comm) noexcept {
    int previous = -1;
    if (cudaGetDevice(&previous) != cudaSuccess) previous = -1;
    cudaSetDevice(device_);
    bool clean = false;
    ncclResult_t res = blocking_comm
                           ? watched("ncclCommFinalize", [c] { return ncclCommFinalize(c); })
                           : ncclCommFinalize(c);
    if (res == ncclSuccess || res == ncclInProgress) {
      const auto deadline = clock_type::now() + timeout();
      ncclResult_t state = ncclInProgress;
      for (const auto since = clock_type::now();; backoff(since)) {
        if (ncclCommGetAsyncError(c, &state) != ncclSuccess) break;
        if (state != ncclInProgress || clock_type::now() > deadline) break;
      }
      clean = state == ncclSuccess;
      if (!clean) {
        WM_LOG(log_level::warn,
               "ncclCommFinalize on rank "
                   << rank() << " did not finish ("
                   << (state == ncclInProgress ? "timed out" : ncclGetErrorString(state))
                   << "); aborting the communicator");
      }
    } else {
      WM_LOG(log_level::warn, "ncclCommFinalize failed: " << ncclGetErrorString(res)
                                                          << "; aborting the communicator");
    }
    if (clean) {
      res = ncclCommDestroy(c);
      if (res != ncclSuccess) {
        WM_LOG(log_level::warn, "ncclCommDestroy failed: " << ncclGetErrorString(res));
      }
    } else {
      res = ncclCommAbort(c);
      if (res != ncclSuccess) {
        WM_LOG(log_level::warn, "ncclCommAbort failed: " << ncclGetErrorString(res));
      }
    }
    if (previous >= 0) cudaSetDevice(previous);
    cudaGetLastError();
    return clean;
  }

  int device_;
  bool checks_;
  bool blocking_;  // collectives run on a blocking child (split_blocking_child)
  // The watchdog: the NCCL call in progress (watched) and since when (clock ticks, 0: none).
  std::atomic<const char*> watch_what_{""};
  std::atomic<clock_type::rep> watch_since_{0};
  std::thread watchdog_;
  std::mutex watchdog_mutex_;
  std::condition_variable watchdog_cv_;
  bool watchdog_stop_ = false;
  std::uint64_t seq_ = 0;
  std::unique_ptr<detail::resource> barrier_owner_;
  void* barrier_buf_ = nullptr;
  ncclComm_t comm_ = nullptr;
  std::atomic<bool> aborted_{false};  // abort_comm ran: collectives can no longer complete
};

}  // namespace

std::shared_ptr<communicator> make_nccl_communicator(std::shared_ptr<bootstrap> bs, int device) {
  WM_EXPECTS(bs != nullptr, "make_nccl_communicator needs a bootstrap");
  const char* what = "creating the NCCL communicator";
  rank_topology topology = discover_topology(*bs);
  detail::collective_step(*bs, what, [&] {
    if (device < 0) device = detail::current_device();
    int count = 0;
    WM_CUDA_TRY(cudaGetDeviceCount(&count));
    WM_EXPECTS(device < count,
               "CUDA device " << device << " is not one of the " << count << " visible devices");
  });
  // NCCL refuses two ranks on one GPU deep inside its init ("Duplicate GPU detected"); say it
  // here, on every rank, with the ways out.
  const gpu_sharing sharing = describe_gpu_sharing(*bs, device);
  if (sharing.shared()) {
    WM_FAIL(logic_error,
            "NCCL needs one GPU per rank, and "
                << sharing.description << " (" << sharing.ranks << " ranks on " << sharing.gpus
                << " GPU(s)); run as many ranks as GPUs, give each rank its own GPU "
                   "(CUDA_VISIBLE_DEVICES), or use the host communicator, which serves ranks "
                   "that share a GPU (continuous and chunked memory need nothing else)");
  }
  // Settings every rank must share: the argument checks (a bootstrap round per collective)
  // and the kind of communicator the collectives run on.
  struct settings {
    int checks;
    int nonblocking;
  };
  const settings mine{checks_from_env() ? 1 : 0, nonblocking_from_env()};
  std::vector<settings> all(bs->size());
  bs->allgather(&mine, all.data(), sizeof(settings));
  auto on_off = [](int v) { return v != 0 ? "on" : "off"; };
  for (int r = 0; r < bs->size(); ++r) {
    if (all[r].nonblocking < 0) {
      const char* text =
          mine.nonblocking < 0 ? std::getenv("WHOLESTORE_NCCL_NONBLOCKING") : nullptr;
      WM_FAIL(logic_error,
              "WHOLESTORE_NCCL_NONBLOCKING must be 0 or 1 (or unset); rank "
                  << r << " has another value"
                  << (text != nullptr ? std::string(" (here: '") + text + "')" : std::string()));
    }
  }
  for (int r = 0; r < bs->size(); ++r) {
    if (all[r].checks != all[0].checks) {
      WM_FAIL(mismatch_error, "WHOLESTORE_CHECK_COLLECTIVES differs between ranks (rank 0: "
                                  << on_off(all[0].checks) << ", rank " << r << ": "
                                  << on_off(all[r].checks)
                                  << "); every rank must use the same setting");
    }
    if (all[r].nonblocking != all[0].nonblocking) {
      WM_FAIL(mismatch_error, "WHOLESTORE_NCCL_NONBLOCKING differs between ranks (rank 0: "
                                  << on_off(all[0].nonblocking) << ", rank " << r << ": "
                                  << on_off(all[r].nonblocking)
                                  << "); every rank must use the same setting");
    }
  }
  auto comm = std::make_shared<nccl_communicator>(std::move(bs), std::move(topology), device,
                                                  mine.checks != 0, mine.nonblocking == 0);
  comm->init();
  return comm;
}

}  // namespace wholememory
