/*
 * Host backend of the communicator: the ranks of one host meet in one anonymous shared-memory
 * segment (a memfd made by local rank 0 and passed to the others over a Unix socket, so no
 * name ever appears in /dev/shm).
 *
 * Segment layout (offsets from the start of the mapping):
 *   header      magic, rank count, slot size, `aborted` (0, or 1 + the rank that gave up) and
 *               why it gave up (the first failure's message, for the others' errors)
 *   arrivals    one cache line per rank: the epoch of the last barrier the rank entered
 *   descriptors [2 halves][ranks] what each rank called (op, dtype, count, root, counts row)
 *   data        [2 halves][ranks] slot_bytes each
 *
 * Every phase of a collective writes into half (e % 2), where e is the epoch of the barrier
 * that ends the phase, and reads that half after the barrier.  A rank can only start writing
 * half (e % 2) again for barrier e + 2 after it passed barrier e + 1, which every rank enters
 * only after it finished reading half (e % 2); so one barrier per phase is enough and no
 * trailing barrier is needed.
 */

#include "fd_exchange.hpp"
#include "posix.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/error.hpp>
#include <wholememory/host_identity.hpp>
#include <wholememory/interrupt.hpp>

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <fstream>
#include <initializer_list>
#include <new>
#include <sstream>
#include <string>
#include <vector>

namespace wholememory {

namespace {

using steady = std::chrono::steady_clock;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "the process-shared barrier needs lock-free (hence address-free) 64-bit atomics");

constexpr std::uint64_t segment_magic = 0x77686f6c65636f6dULL;  // "wholecom"
// Per rank and half.  Collectives larger than this run in rounds of one barrier each.
constexpr std::size_t slot_bytes = std::size_t{4} << 20;
constexpr std::size_t cache_line = 64;
constexpr std::size_t page = 4096;
constexpr auto liveness_interval = std::chrono::milliseconds(100);
constexpr long max_sleep_ns = 1000 * 1000;

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

struct segment_header {
  std::uint64_t magic;
  std::uint64_t ranks;
  std::uint64_t slot_bytes;
  std::atomic<std::uint64_t> aborted;      // set after abort_reason is written
  std::atomic<std::uint64_t> abort_claim;  // 1 + the rank that writes abort_reason
  char abort_reason[512];
};

struct alignas(cache_line) arrival {
  std::atomic<std::uint64_t> epoch;
};

enum class op_kind : std::int32_t {
  barrier = 1,
  broadcast,
  allgather,
  alltoallv,
  allreduce_sum,
  split
};

const char* op_name(std::int32_t op) {
  switch (static_cast<op_kind>(op)) {
    case op_kind::barrier:
      return "barrier";
    case op_kind::broadcast:
      return "broadcast";
    case op_kind::allgather:
      return "allgather";
    case op_kind::alltoallv:
      return "alltoallv";
    case op_kind::allreduce_sum:
      return "allreduce_sum";
    case op_kind::split:
      return "split";
  }
  return "unknown";
}

/// What one rank called, published before the first barrier of every collective.  Plain
/// fields: the release/acquire of the barrier's epochs orders them.
struct op_descriptor {
  std::uint64_t sequence;
  std::int32_t op;
  std::int32_t type;
  std::uint64_t count;
  std::int32_t root;
  std::int32_t reserved;
  /// This rank's argument error, or empty.  Published instead of thrown at once so that every
  /// rank fails together instead of the others waiting for the one that threw.
  char error[112];
  // Followed by std::uint64_t counts[2 * ranks]: alltoallv send counts, then recv counts.
};

struct segment_layout {
  std::size_t ranks = 0;
  std::size_t arrivals_offset = 0;
  std::size_t descriptors_offset = 0;
  std::size_t descriptor_stride = 0;
  std::size_t data_offset = 0;
  std::size_t total = 0;

  explicit segment_layout(std::size_t n) : ranks(n) {
    arrivals_offset = round_up(sizeof(segment_header), cache_line);
    descriptors_offset = arrivals_offset + n * sizeof(arrival);
    descriptor_stride = round_up(sizeof(op_descriptor) + 2 * n * sizeof(std::uint64_t), cache_line);
    data_offset = round_up(descriptors_offset + 2 * n * descriptor_stride, page);
    total = data_offset + 2 * n * slot_bytes;
  }
};

// ---- element types ---------------------------------------------------------------------------

// 16-bit floats add in float; the conversions are the gather's (convert.hpp).
float half_bits_to_float(std::uint16_t h) { return half_to_float(half_t{h}); }
std::uint16_t float_to_half_bits(float f) { return double_to_half(f).bits; }
float bfloat16_bits_to_float(std::uint16_t b) { return bfloat16_to_float(bfloat16_t{b}); }
std::uint16_t float_to_bfloat16_bits(float f) { return double_to_bfloat16(f).bits; }

/// out[i] = in[0][i] + in[1][i] + ... in rank order, so that every rank computes the same
/// bits.  Integers wrap around (computed unsigned); 16-bit floats add in float and round once.
template <typename T, typename Acc, typename Load, typename Store>
void sum_elements(void* out, const std::vector<const void*>& in, std::size_t count, Load load,
                  Store store) {
  T* dst = static_cast<T*>(out);
  for (std::size_t i = 0; i < count; ++i) {
    Acc acc = load(static_cast<const T*>(in[0])[i]);
    for (std::size_t r = 1; r < in.size(); ++r) acc += load(static_cast<const T*>(in[r])[i]);
    dst[i] = store(acc);
  }
}

template <typename T, typename U>
void sum_wrapping(void* out, const std::vector<const void*>& in, std::size_t count) {
  sum_elements<T, U>(
      out, in, count, [](T v) { return static_cast<U>(v); }, [](U v) { return static_cast<T>(v); });
}

template <typename T>
void sum_plain(void* out, const std::vector<const void*>& in, std::size_t count) {
  sum_elements<T, T>(
      out, in, count, [](T v) { return v; }, [](T v) { return v; });
}

void sum_into(dtype type, void* out, const std::vector<const void*>& in, std::size_t count) {
  switch (type) {
    case dtype::int8:
      return sum_wrapping<std::int8_t, std::uint8_t>(out, in, count);
    case dtype::int16:
      return sum_wrapping<std::int16_t, std::uint16_t>(out, in, count);
    case dtype::int32:
      return sum_wrapping<std::int32_t, std::uint32_t>(out, in, count);
    case dtype::int64:
      return sum_wrapping<std::int64_t, std::uint64_t>(out, in, count);
    case dtype::uint8:
      return sum_wrapping<std::uint8_t, std::uint8_t>(out, in, count);
    case dtype::float16:
      return sum_elements<std::uint16_t, float>(out, in, count, half_bits_to_float,
                                                float_to_half_bits);
    case dtype::bfloat16:
      return sum_elements<std::uint16_t, float>(out, in, count, bfloat16_bits_to_float,
                                                float_to_bfloat16_bits);
    case dtype::float32:
      return sum_plain<float>(out, in, count);
    case dtype::float64:
      return sum_plain<double>(out, in, count);
  }
  WM_FAIL(logic_error, "allreduce_sum: unsupported dtype value " << static_cast<int>(type));
}

// ---- liveness --------------------------------------------------------------------------------

/// False when `pid` has exited.  A killed child that its parent has not reaped yet still
/// answers kill(pid, 0), so the zombie state in /proc counts as dead too.
bool process_alive(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) == -1 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!stat || !std::getline(stat, line)) return true;  // cannot tell: assume alive
  const std::size_t paren = line.rfind(')');
  if (paren == std::string::npos || paren + 2 >= line.size()) return true;
  const char state = line[paren + 2];
  return state != 'Z' && state != 'X';
}

void sleep_ns(long ns) {
  timespec ts{0, ns};
  // An interrupted sleep only shortens one backoff step; the wait loop re-checks anyway.
  ::nanosleep(&ts, nullptr);
}

// ---- the communicator ------------------------------------------------------------------------

/// One collective call as this rank sees it.
struct call_args {
  explicit call_args(op_kind kind, dtype element = dtype::uint8, std::size_t elements = 0,
                     int root_rank = 0)
      : op(kind), type(element), count(elements), root(root_rank) {}
  op_kind op;
  dtype type;
  std::size_t count;
  int root;
  const std::size_t* send_counts = nullptr;  // alltoallv
  const std::size_t* recv_counts = nullptr;  // alltoallv
  std::string error;                         // this rank's argument error, if any
};

class host_communicator final : public communicator {
 public:
  host_communicator(std::shared_ptr<bootstrap> bs, rank_topology topology, detail::mapping segment)
      : communicator(std::move(bs), std::move(topology)),
        layout_(static_cast<std::size_t>(size())),
        segment_(std::move(segment)),
        base_(static_cast<char*>(segment_.get())),
        self_pid_(static_cast<long>(::getpid())) {}

  backend get_backend() const override { return backend::host; }
  int device() const override { return -1; }
  bool broken() const override {
    return header().aborted.load(std::memory_order_acquire) != 0 || bootstrap_->broken();
  }

  void barrier(cudaStream_t) override {
    run([&] { begin(call_args{op_kind::barrier}); });
  }

  void broadcast(void* buffer, std::size_t count, dtype type, int root, cudaStream_t) override {
    run([&] {
      call_args args{op_kind::broadcast, type, count, root};
      check_element_args(args, count, {buffer});
      if (root < 0 || root >= size())
        args.error =
            "root " + std::to_string(root) + " out of range [0, " + std::to_string(size()) + ")";
      begin(args);
      const std::size_t bytes = count * dtype_size(type);
      // The root's chunk may use the whole half: nobody else writes during a broadcast.
      const std::size_t chunk = slot_bytes * layout_.ranks;
      auto* bytes_ptr = static_cast<char*>(buffer);
      for (std::size_t offset = 0; offset < bytes; offset += chunk) {
        const std::size_t len = std::min(chunk, bytes - offset);
        const int half = next_half();
        if (rank() == root) std::memcpy(data(half, 0), bytes_ptr + offset, len);
        wait_all(args.op);
        if (rank() != root) std::memcpy(bytes_ptr + offset, data(half, 0), len);
      }
    });
  }

  void allgather(const void* send, void* recv, std::size_t count, dtype type,
                 cudaStream_t) override {
    run([&] {
      call_args args{op_kind::allgather, type, count};
      check_element_args(args, count, {send, recv});
      begin(args);
      const std::size_t bytes = count * dtype_size(type);
      const auto* in = static_cast<const char*>(send);
      auto* out = static_cast<char*>(recv);
      for (std::size_t offset = 0; offset < bytes; offset += slot_bytes) {
        const std::size_t len = std::min(slot_bytes, bytes - offset);
        const int half = next_half();
        std::memcpy(data(half, rank()), in + offset, len);
        wait_all(args.op);
        for (int r = 0; r < size(); ++r) std::memcpy(out + r * bytes + offset, data(half, r), len);
      }
    });
  }

  void alltoallv(const void* send, const std::size_t* send_counts, const std::size_t* send_displs,
                 void* recv, const std::size_t* recv_counts, const std::size_t* recv_displs,
                 dtype type, cudaStream_t) override {
    run([&] {
      call_args args{op_kind::alltoallv, type};
      args.send_counts = send_counts;
      args.recv_counts = recv_counts;
      if (send_counts == nullptr || recv_counts == nullptr || send_displs == nullptr ||
          recv_displs == nullptr) {
        args.error = "count and displacement arrays must not be null";
      } else {
        std::size_t sent = 0, received = 0;
        for (int r = 0; r < size(); ++r) {
          sent += send_counts[r];
          received += recv_counts[r];
        }
        check_element_args(args, sent, {send});
        check_element_args(args, received, {recv});
      }
      begin(args);
      exchange(static_cast<const char*>(send), send_displs, static_cast<char*>(recv), recv_displs,
               dtype_size(type));
    });
  }

  void allreduce_sum(const void* send, void* recv, std::size_t count, dtype type,
                     cudaStream_t) override {
    run([&] {
      call_args args{op_kind::allreduce_sum, type, count};
      check_element_args(args, count, {send, recv});
      begin(args);
      const std::size_t element = dtype_size(type);
      const std::size_t chunk = slot_bytes / element;
      const auto* in = static_cast<const char*>(send);
      auto* out = static_cast<char*>(recv);
      std::vector<const void*> inputs(layout_.ranks);
      for (std::size_t first = 0; first < count; first += chunk) {
        const std::size_t n = std::min(chunk, count - first);
        const int half = next_half();
        std::memcpy(data(half, rank()), in + first * element, n * element);
        wait_all(args.op);
        for (int r = 0; r < size(); ++r) inputs[r] = data(half, r);
        sum_into(type, out + first * element, inputs, n);
      }
    });
  }

  void synchronize(cudaStream_t) override {}

  std::shared_ptr<communicator> split(int color, int key) override {
    // Checked like a collective first, so that a rank that calls split while the others call
    // something else fails with mismatch_error instead of two timeouts in different places.
    run([&] { begin(call_args{op_kind::split}); });
    std::unique_ptr<bootstrap> sub = bootstrap_->split(color, key);
    if (!sub) return nullptr;
    return make_host_communicator(std::shared_ptr<bootstrap>(std::move(sub)));
  }

 private:
  segment_header& header() const { return *reinterpret_cast<segment_header*>(base_); }
  arrival& arrival_of(int r) const {
    return reinterpret_cast<arrival*>(base_ + layout_.arrivals_offset)[r];
  }
  op_descriptor& descriptor(int half, int r) const {
    return *reinterpret_cast<op_descriptor*>(base_ + layout_.descriptors_offset +
                                             (static_cast<std::size_t>(half) * layout_.ranks + r) *
                                                 layout_.descriptor_stride);
  }
  std::uint64_t* descriptor_counts(int half, int r) const {
    return reinterpret_cast<std::uint64_t*>(reinterpret_cast<char*>(&descriptor(half, r)) +
                                            sizeof(op_descriptor));
  }
  char* data(int half, int r) const {
    return base_ + layout_.data_offset +
           (static_cast<std::size_t>(half) * layout_.ranks + r) * slot_bytes;
  }
  /// The half written before the next barrier and read right after it.
  int next_half() const { return static_cast<int>((epoch_ + 1) & 1); }

  /// Records the first local argument error (null buffer, size overflow, bad dtype).
  static void check_element_args(call_args& args, std::size_t count,
                                 std::initializer_list<const void*> buffers) {
    if (!args.error.empty()) return;
    std::size_t element = 0;
    try {
      element = dtype_size(args.type);
    } catch (const logic_error&) {
      args.error = "unknown dtype value " + std::to_string(static_cast<int>(args.type));
      return;
    }
    if (count > SIZE_MAX / element) {
      args.error = "count " + std::to_string(count) + " overflows the byte size";
      return;
    }
    for (const void* p : buffers) {
      if (count > 0 && p == nullptr) {
        args.error = "null buffer for " + std::to_string(count) + " elements";
        return;
      }
    }
  }

  /// Runs one collective.  A failure other than a (consistently detected) argument or mismatch
  /// error marks the segment aborted, so the peers stop waiting and fail too.
  template <typename Body>
  void run(Body&& body) {
    const std::uint64_t aborted = header().aborted.load(std::memory_order_acquire);
    if (aborted != 0)
      WM_FAIL(timeout_error, "host communicator: unusable since rank "
                                 << aborted - 1
                                 << " gave up on an earlier collective: " << abort_reason());
    try {
      body();
    } catch (const logic_error&) {
      throw;
    } catch (const std::exception& e) {
      abort_segment(e.what());
      throw;
    } catch (...) {
      abort_segment("an exception that is not a std::exception");
      throw;
    }
  }

  /// Marks the segment aborted with `why`, unless another rank did first.
  void abort_segment(const char* why) {
    std::uint64_t expected = 0;
    segment_header& h = header();
    if (!h.abort_claim.compare_exchange_strong(expected, static_cast<std::uint64_t>(rank()) + 1,
                                               std::memory_order_acq_rel)) {
      return;
    }
    std::snprintf(h.abort_reason, sizeof(h.abort_reason), "%s", why);
    h.aborted.store(static_cast<std::uint64_t>(rank()) + 1, std::memory_order_release);
  }

  /// Why the rank named by `aborted` gave up (valid once `aborted` was read non-zero).
  std::string abort_reason() const {
    const segment_header& h = header();
    return std::string(h.abort_reason, strnlen(h.abort_reason, sizeof(h.abort_reason)));
  }

  /// Publishes this rank's call, waits for every rank and checks that they all agree.  Every
  /// rank reads the same descriptors, so all of them throw the same error or none does, and all
  /// of them have passed the barrier either way.
  void begin(const call_args& args) {
    ++sequence_;
    const int half = next_half();
    op_descriptor& mine = descriptor(half, rank());
    mine.sequence = sequence_;
    mine.op = static_cast<std::int32_t>(args.op);
    mine.type = static_cast<std::int32_t>(args.type);
    mine.count = args.count;
    mine.root = args.root;
    std::memset(mine.error, 0, sizeof(mine.error));
    std::strncpy(mine.error, args.error.c_str(), sizeof(mine.error) - 1);
    std::uint64_t* counts = descriptor_counts(half, rank());
    for (std::size_t r = 0; r < layout_.ranks; ++r) {
      counts[r] = args.send_counts != nullptr ? args.send_counts[r] : 0;
      counts[layout_.ranks + r] = args.recv_counts != nullptr ? args.recv_counts[r] : 0;
    }
    wait_all(args.op);
    verify(half);
  }

  void verify(int half) {
    const op_descriptor& first = descriptor(half, 0);
    const char* name = op_name(first.op);
    for (int r = 1; r < size(); ++r) {
      const op_descriptor& d = descriptor(half, r);
      if (d.op != first.op)
        WM_FAIL(mismatch_error, "collective #" << first.sequence << ": rank 0 called " << name
                                               << ", rank " << r << " called " << op_name(d.op));
      if (d.sequence != first.sequence)
        WM_FAIL(mismatch_error, name << ": rank 0 is at collective #" << first.sequence << ", rank "
                                     << r << " at #" << d.sequence);
    }
    for (int r = 0; r < size(); ++r) {
      const op_descriptor& d = descriptor(half, r);
      if (d.error[0] != '\0')
        WM_FAIL(logic_error, name << " #" << first.sequence << ": rank " << r << ": "
                                  << std::string(d.error, strnlen(d.error, sizeof(d.error))));
    }
    const auto op = static_cast<op_kind>(first.op);
    if (op == op_kind::barrier || op == op_kind::split) return;
    for (int r = 1; r < size(); ++r) {
      const op_descriptor& d = descriptor(half, r);
      if (d.type != first.type)
        WM_FAIL(mismatch_error, name << " #" << first.sequence << ": rank 0 dtype "
                                     << dtype_name(static_cast<dtype>(first.type)) << ", rank " << r
                                     << " dtype " << dtype_name(static_cast<dtype>(d.type)));
      if (op != op_kind::alltoallv && d.count != first.count)
        WM_FAIL(mismatch_error, name << " #" << first.sequence << ": rank 0 count " << first.count
                                     << ", rank " << r << " count " << d.count);
      if (op == op_kind::broadcast && d.root != first.root)
        WM_FAIL(mismatch_error, name << " #" << first.sequence << ": rank 0 root " << first.root
                                     << ", rank " << r << " root " << d.root);
    }
    if (op != op_kind::alltoallv) return;
    // Keep the matrix: the descriptors of this half are overwritten two barriers from now.
    const std::size_t n = layout_.ranks;
    send_matrix_.assign(n * n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t* counts_i = descriptor_counts(half, static_cast<int>(i));
      for (std::size_t j = 0; j < n; ++j) {
        const std::uint64_t sends = counts_i[j];
        const std::uint64_t expects = descriptor_counts(half, static_cast<int>(j))[n + i];
        if (sends != expects)
          WM_FAIL(mismatch_error, name << " #" << first.sequence << ": rank " << i << " sends "
                                       << sends << " elements to rank " << j << ", which expects "
                                       << expects << " from it");
        send_matrix_[i * n + j] = sends;
      }
    }
  }

  /// The data rounds of alltoallv.  Rank i's outgoing elements for the other ranks,
  /// concatenated in destination order, form one byte stream; round k carries bytes
  /// [k * slot, (k + 1) * slot) of every rank's stream through its slot.  A rank's elements for
  /// itself are copied directly and never enter the stream (every rank leaves the diagonal of
  /// the count matrix out of every stream alike): with two ranks and an even split that halves
  /// the bytes through the segment (134 MB a rank on the 2-core VM: 26.4-26.6 ms before,
  /// 20.3-22.7 ms after).
  void exchange(const char* send, const std::size_t* send_displs, char* recv,
                const std::size_t* recv_displs, std::size_t element) {
    const std::size_t n = layout_.ranks;
    const auto me = static_cast<std::size_t>(rank());
    const std::size_t own = send_matrix_[me * n + me] * element;
    if (own > 0)
      std::memmove(recv + recv_displs[me] * element, send + send_displs[me] * element, own);
    // stream_offset[i * (n + 1) + j]: where rank i's bytes for rank j start in its stream.
    std::vector<std::size_t> stream_offset(n * (n + 1), 0);
    std::size_t longest = 0;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j)
        stream_offset[i * (n + 1) + j + 1] =
            stream_offset[i * (n + 1) + j] + (i == j ? 0 : send_matrix_[i * n + j] * element);
      longest = std::max(longest, stream_offset[i * (n + 1) + n]);
    }
    for (std::size_t window = 0; window < longest; window += slot_bytes) {
      const std::size_t window_end = window + slot_bytes;
      const int half = next_half();
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t begin = std::max(stream_offset[me * (n + 1) + j], window);
        const std::size_t end = std::min(stream_offset[me * (n + 1) + j + 1], window_end);
        if (begin >= end) continue;
        std::memcpy(data(half, rank()) + (begin - window),
                    send + send_displs[j] * element + (begin - stream_offset[me * (n + 1) + j]),
                    end - begin);
      }
      wait_all(op_kind::alltoallv);
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t begin = std::max(stream_offset[i * (n + 1) + me], window);
        const std::size_t end = std::min(stream_offset[i * (n + 1) + me + 1], window_end);
        if (begin >= end) continue;
        std::memcpy(recv + recv_displs[i] * element + (begin - stream_offset[i * (n + 1) + me]),
                    data(half, static_cast<int>(i)) + (begin - window), end - begin);
      }
    }
  }

  /// The process-shared barrier: announce this rank's epoch, then wait until every rank has
  /// announced it.  Spins briefly (collectives of small messages are latency bound), then
  /// sleeps with a growing backoff so that waiting ranks leave the cores to the ones working.
  void wait_all(op_kind op) {
    const std::uint64_t target = ++epoch_;
    arrival_of(rank()).epoch.store(target, std::memory_order_release);
    const auto start = steady::now();
    const auto deadline = start + timeout();
    auto next_liveness_check = start + liveness_interval;
    long backoff_ns = 1000;
    for (unsigned attempt = 0;; ++attempt) {
      int missing = -1;
      for (int r = 0; r < size(); ++r) {
        if (arrival_of(r).epoch.load(std::memory_order_acquire) < target) {
          missing = r;
          break;
        }
      }
      if (missing < 0) return;
      const std::uint64_t aborted = header().aborted.load(std::memory_order_acquire);
      if (aborted != 0)
        WM_FAIL(timeout_error, "host communicator " << op_name(static_cast<std::int32_t>(op))
                                                    << " #" << sequence_ << ": rank " << aborted - 1
                                                    << " gave up: " << abort_reason());
      if (attempt < 64) continue;
      if (attempt < 128) {
        ::sched_yield();
        continue;
      }
      const auto now = steady::now();
      if (now >= next_liveness_check) {
        check_liveness(op, target);
        next_liveness_check = now + liveness_interval;
      }
      if (now >= deadline) fail_timeout(op, target);
      if (interrupt_requested())
        WM_FAIL(interrupted_error, "host communicator " << op_name(static_cast<std::int32_t>(op))
                                                        << " #" << sequence_
                                                        << ": interrupted while waiting for "
                                                           "the other ranks");
      sleep_ns(backoff_ns);
      backoff_ns = std::min(backoff_ns * 2, max_sleep_ns);
    }
  }

  void check_liveness(op_kind op, std::uint64_t target) const {
    for (int r = 0; r < size(); ++r) {
      const long pid = topology_.pids[r];
      if (pid == self_pid_) continue;  // a thread of this process cannot die alone
      if (arrival_of(r).epoch.load(std::memory_order_acquire) >= target) continue;
      if (!process_alive(pid))
        WM_FAIL(timeout_error, "host communicator " << op_name(static_cast<std::int32_t>(op))
                                                    << " #" << sequence_ << ": rank " << r
                                                    << " (pid " << pid << ") died");
    }
  }

  [[noreturn]] void fail_timeout(op_kind op, std::uint64_t target) const {
    std::ostringstream missing;
    for (int r = 0; r < size(); ++r) {
      if (arrival_of(r).epoch.load(std::memory_order_acquire) < target)
        missing << (missing.tellp() > 0 ? ", " : "") << r << " (pid " << topology_.pids[r] << ")";
    }
    WM_FAIL(timeout_error, "host communicator " << op_name(static_cast<std::int32_t>(op)) << " #"
                                                << sequence_ << ": timed out after "
                                                << timeout().count() << " ms waiting for rank(s) "
                                                << missing.str());
  }

  segment_layout layout_;
  detail::mapping segment_;
  char* base_;
  long self_pid_;
  std::uint64_t epoch_ = 0;                 // barriers this rank has entered
  std::uint64_t sequence_ = 0;              // collectives this rank has called
  std::vector<std::uint64_t> send_matrix_;  // alltoallv counts [from][to] of the current call
};

/// One bootstrap round so that a local failure fails the call on every rank at once.
void agree(bootstrap& bs, const std::exception_ptr& failure, const char* what) {
  std::int32_t mine = failure ? 1 : 0;
  std::vector<std::int32_t> all(static_cast<std::size_t>(bs.size()));
  bs.allgather(&mine, all.data(), sizeof(mine));
  if (failure) std::rethrow_exception(failure);
  for (int r = 0; r < bs.size(); ++r) {
    if (all[r] != 0)
      WM_FAIL(system_error, "make_host_communicator: rank " << r << " failed " << what);
  }
}

}  // namespace

std::shared_ptr<communicator> make_host_communicator(std::shared_ptr<bootstrap> bs) {
  WM_EXPECTS(bs != nullptr, "make_host_communicator needs a bootstrap");
  rank_topology topology = discover_topology(*bs);
  if (topology.num_hosts != 1) {
    // Every rank sees the same topology, so all of them take this extra round and throw.
    std::vector<std::string> names = bs->allgatherv(host_identity());
    std::ostringstream hosts;
    std::vector<std::string> seen;
    for (const std::string& name : names) {
      if (std::find(seen.begin(), seen.end(), name) != seen.end()) continue;
      hosts << (seen.empty() ? "" : ", ") << name;
      seen.push_back(name);
    }
    WM_FAIL(logic_error, "the host communicator needs every rank on one host, but the "
                             << bs->size() << " ranks span " << topology.num_hosts
                             << " hosts: " << hosts.str());
  }

  const segment_layout layout(static_cast<std::size_t>(bs->size()));
  detail::unique_fd segment_fd;
  detail::mapping segment;
  std::exception_ptr failure;
  if (topology.local_rank == 0) {
    try {
      segment_fd = detail::create_shared_memory("wholestore-host-communicator", layout.total);
      segment = detail::map_shared(segment_fd.get(), layout.total);
      char* base = static_cast<char*>(segment.get());
      // ftruncate zero-fills; the atomics are still constructed before anyone uses them.
      auto* header = new (base) segment_header{};
      header->magic = segment_magic;
      header->ranks = layout.ranks;
      header->slot_bytes = slot_bytes;
      header->aborted.store(0, std::memory_order_relaxed);
      header->abort_claim.store(0, std::memory_order_relaxed);
      header->abort_reason[0] = '\0';
      for (std::size_t r = 0; r < layout.ranks; ++r)
        new (base + layout.arrivals_offset + r * sizeof(arrival)) arrival{};
    } catch (...) {
      failure = std::current_exception();
      segment = detail::mapping{};
      segment_fd.reset();
    }
  }
  agree(*bs, failure, "creating the shared-memory segment");

  std::vector<detail::unique_fd> fds =
      detail::allgather_local_fds(*bs, topology, topology.local_rank == 0 ? segment_fd.get() : -1);
  segment_fd.reset();
  try {
    WM_EXPECTS(fds.size() == layout.ranks && fds[0].valid(),
               "local rank 0 did not share the segment");
    if (topology.local_rank != 0) segment = detail::map_shared(fds[0].get(), layout.total);
    const auto* header = static_cast<const segment_header*>(segment.get());
    WM_EXPECTS(header->magic == segment_magic && header->ranks == layout.ranks &&
                   header->slot_bytes == slot_bytes,
               "shared segment has ranks " << header->ranks << " and slot size "
                                           << header->slot_bytes << ", expected " << layout.ranks
                                           << " and " << slot_bytes);
  } catch (...) {
    failure = std::current_exception();
  }
  fds.clear();
  agree(*bs, failure, "mapping the shared-memory segment");
  return std::make_shared<host_communicator>(std::move(bs), std::move(topology),
                                             std::move(segment));
}

}  // namespace wholememory
