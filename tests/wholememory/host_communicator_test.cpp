/*
 * The host backend and the POSIX pieces under it: memfd segments and mappings, descriptor
 * passing between the ranks of a host, topology discovery, and every collective of the host
 * communicator against references computed here, as forked processes and as threads.
 */
#include "fd_exchange.hpp"
#include "posix.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include "common/multiprocess.hpp"

#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using wholememory::dtype;
using namespace std::chrono_literals;
namespace wm = wholememory;
namespace wmd = wholememory::detail;

constexpr std::size_t slot = std::size_t{4} << 20;  // the backend's slot; sizes straddle it
constexpr dtype all_dtypes[] = {dtype::int8,     dtype::int16,   dtype::int32,
                                dtype::int64,    dtype::uint8,   dtype::float16,
                                dtype::bfloat16, dtype::float32, dtype::float64};

// ---- test infrastructure ---------------------------------------------------------------------

std::set<std::string> dev_shm_entries() {
  std::set<std::string> names;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (dirent* e = ::readdir(dir)) names.insert(e->d_name);
  ::closedir(dir);
  return names;
}

/// Every test must leave /dev/shm as it found it: the backend only uses anonymous memfds.
class shm_clean_test : public ::testing::Test {
 protected:
  void SetUp() override { before_ = dev_shm_entries(); }
  void TearDown() override {
    for (const std::string& name : dev_shm_entries())
      EXPECT_TRUE(before_.count(name) != 0) << "new /dev/shm entry: " << name;
  }

 private:
  std::set<std::string> before_;
};

enum class mode { fork, thread };

struct job {
  int ranks;
  mode how;
};

void PrintTo(const job& j, std::ostream* os) {
  *os << j.ranks << (j.how == mode::fork ? " forked processes" : " threads");
}

std::string job_name(const ::testing::TestParamInfo<job>& info) {
  return std::string(info.param.how == mode::fork ? "fork" : "thread") +
         std::to_string(info.param.ranks);
}

std::vector<job> jobs(int min_ranks, int max_ranks) {
  std::vector<job> all;
  for (mode how : {mode::fork, mode::thread})
    for (int n = min_ranks; n <= max_ranks; ++n) all.push_back({n, how});
  return all;
}

void run_job(const job& j, const wholestore_test::rank_body& body,
             std::chrono::milliseconds timeout = 60s) {
  if (j.how == mode::fork) {
    wholestore_test::fork_result result = wholestore_test::fork_ranks(j.ranks, body, timeout);
    for (int r = 0; r < j.ranks; ++r)
      EXPECT_EQ(result.status[r], 0) << "forked rank " << r << " failed";
  } else {
    wholestore_test::thread_ranks(j.ranks, body, timeout);
  }
}

/// splitmix64: fast, and every rank can regenerate any other rank's input from its seed.
struct random_stream {
  std::uint64_t state;
  explicit random_stream(std::uint64_t seed) : state(seed * 0x9e3779b97f4a7c15ULL + 1) {}
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(next() % n); }
};

std::size_t element_size(dtype t) {
  switch (t) {
    case dtype::int8:
    case dtype::uint8:
      return 1;
    case dtype::int16:
    case dtype::float16:
    case dtype::bfloat16:
      return 2;
    case dtype::int32:
    case dtype::float32:
      return 4;
    case dtype::int64:
    case dtype::float64:
      return 8;
  }
  return 0;
}

/// Random elements; floats are finite with moderate exponents so sums neither overflow nor
/// produce NaN, and every bit of the mantissa is exercised.
std::vector<unsigned char> random_elements(dtype t, std::size_t count, std::uint64_t seed) {
  random_stream rng(seed);
  const std::size_t es = element_size(t);
  std::vector<unsigned char> out(count * es);
  if (!wm::is_floating(t)) {  // any bit pattern: eight random bytes per draw
    for (std::size_t i = 0; i < out.size(); i += 8) {
      const std::uint64_t bits = rng.next();
      std::memcpy(out.data() + i, &bits, std::min<std::size_t>(8, out.size() - i));
    }
    return out;
  }
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t bits = rng.next();
    const std::uint64_t sign = bits & 1;
    switch (t) {
      case dtype::float16:  // exponent 10..20: magnitudes 2^-5 .. 2^6
        bits = (sign << 15) | ((10 + (bits >> 8) % 11) << 10) | ((bits >> 20) & 0x3ff);
        break;
      case dtype::bfloat16:  // exponent 120..134
        bits = (sign << 15) | ((120 + (bits >> 8) % 15) << 7) | ((bits >> 20) & 0x7f);
        break;
      case dtype::float32:
        bits = (sign << 31) | ((120 + (bits >> 8) % 15) << 23) | ((bits >> 20) & 0x7fffff);
        break;
      default:  // float64
        bits =
            (sign << 63) | ((1016 + (bits >> 8) % 15) << 52) | ((bits >> 11) & 0xfffffffffffffULL);
        break;
    }
    std::memcpy(out.data() + i * es, &bits, es);  // little-endian: the low bytes
  }
  return out;
}

/// Reference decoding of 16-bit floats from their definition, independent of the backend.
/// The all-ones exponent (inf, nan; never an input here) reads as the next binade, 2^16 or
/// 2^128, which is where round-to-nearest overflows to infinity.
double decode_half(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -24) : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000) ? -magnitude : magnitude;
}

double decode_bfloat16(std::uint16_t b) {
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  double magnitude =
      exponent == 0 ? std::ldexp(mantissa, -133) : std::ldexp(128 + mantissa, exponent - 134);
  return (b & 0x8000) ? -magnitude : magnitude;
}

/// Round to nearest, ties to the even encoding, for a format whose non-negative encodings
/// are ordered like their values: of the two encodings around `v`, the nearer one wins.
std::uint16_t encode_nearest(double v, double (*decode)(std::uint16_t), std::uint16_t lo) {
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  while (decode(lo) > a) --lo;  // `lo` is a guess from below or just above
  while (decode(static_cast<std::uint16_t>(lo + 1)) <= a) ++lo;
  const std::uint16_t hi = static_cast<std::uint16_t>(lo + 1);
  const double dlo = a - decode(lo), dhi = decode(hi) - a;
  if (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) return sign | lo;
  return sign | hi;
}

std::uint16_t encode_half(float v) {
#if defined(__FLT16_MANT_DIG__)
  // The compiler's own conversion (round to nearest even) is independent of the backend's.
  const _Float16 h = static_cast<_Float16>(v);
  std::uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
#else
  // Binary search of the largest encoding not above |v|.
  const double a = std::fabs(v);
  std::uint16_t lo = 0, hi = 0x7bff;
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (decode_half(mid) <= a)
      lo = mid;
    else
      hi = static_cast<std::uint16_t>(mid - 1);
  }
  return encode_nearest(v, decode_half, lo);
#endif
}

std::uint16_t encode_bfloat16(float v) {
  if (std::isinf(v)) return std::signbit(v) ? 0xff80 : 0x7f80;
  // Truncation toward zero is the encoding just below |v|.
  std::uint32_t bits;
  const float a = std::fabs(v);
  std::memcpy(&bits, &a, sizeof(bits));
  return encode_nearest(v, decode_bfloat16, static_cast<std::uint16_t>(bits >> 16));
}

template <typename T>
std::vector<T> as(const std::vector<unsigned char>& bytes) {
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T>& values) {
  std::vector<unsigned char> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// Sum in rank order: decode each element to `Acc`, add, encode back.
template <typename T, typename Acc, typename Decode, typename Encode>
std::vector<unsigned char> sum_as(const std::vector<std::vector<unsigned char>>& in, Decode decode,
                                  Encode encode) {
  std::vector<std::vector<T>> typed;
  for (const auto& bytes : in) typed.push_back(as<T>(bytes));
  std::vector<T> out(typed[0].size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    Acc acc = decode(typed[0][i]);
    for (std::size_t r = 1; r < typed.size(); ++r) acc += decode(typed[r][i]);
    out[i] = encode(acc);
  }
  return bytes_of(out);
}

/// Every finite encoding's value (exact in float), so the reference decodes by lookup.
std::vector<float> decode_table(double (*decode)(std::uint16_t), std::uint16_t exponent_mask) {
  std::vector<float> values(65536);
  for (std::uint32_t b = 0; b < values.size(); ++b) {
    values[b] = (b & exponent_mask) == exponent_mask
                    ? std::numeric_limits<float>::infinity()
                    : static_cast<float>(decode(static_cast<std::uint16_t>(b)));
  }
  return values;
}

/// The documented semantics of allreduce_sum: rank order; integers wrap; float16/bfloat16
/// add in float and round once.
std::vector<unsigned char> reference_sum(dtype t,
                                         const std::vector<std::vector<unsigned char>>& in) {
  auto same = [](auto v) { return v; };
  // Integers: the low bits of a 64-bit unsigned sum are the wrapped sum.
  auto wide = [](auto v) { return static_cast<std::uint64_t>(v); };
  auto narrow = [](auto type_tag) {
    return [](std::uint64_t v) { return static_cast<decltype(type_tag)>(v); };
  };
  static const std::vector<float> half_values = decode_table(decode_half, 0x7c00);
  static const std::vector<float> bf16_values = decode_table(decode_bfloat16, 0x7f80);
  auto half_in = [](std::uint16_t h) { return half_values[h]; };
  auto bf16_in = [](std::uint16_t b) { return bf16_values[b]; };
  switch (t) {
    case dtype::int8:
      return sum_as<std::int8_t, std::uint64_t>(in, wide, narrow(std::int8_t{}));
    case dtype::int16:
      return sum_as<std::int16_t, std::uint64_t>(in, wide, narrow(std::int16_t{}));
    case dtype::int32:
      return sum_as<std::int32_t, std::uint64_t>(in, wide, narrow(std::int32_t{}));
    case dtype::int64:
      return sum_as<std::int64_t, std::uint64_t>(in, wide, narrow(std::int64_t{}));
    case dtype::uint8:
      return sum_as<std::uint8_t, std::uint64_t>(in, wide, narrow(std::uint8_t{}));
    case dtype::float16:
      return sum_as<std::uint16_t, float>(in, half_in, encode_half);
    case dtype::bfloat16:
      return sum_as<std::uint16_t, float>(in, bf16_in, encode_bfloat16);
    case dtype::float32:
      return sum_as<float, float>(in, same, same);
    case dtype::float64:
      return sum_as<double, double>(in, same, same);
  }
  ADD_FAILURE() << "no reference for dtype " << static_cast<int>(t);
  return {};
}

/// Element counts for a dtype: 0, 1, a small odd one and one above a slot (chunked).
std::vector<std::size_t> test_counts(dtype t, random_stream& rng) {
  const std::size_t es = element_size(t);
  return {0, 1, 2 + rng.below(999), (slot + slot / 4) / es + 3};
}

std::shared_ptr<wm::communicator> make_comm(std::shared_ptr<wm::bootstrap> bs) {
  return wm::make_host_communicator(std::move(bs));
}

bool close_on_exec(int fd) { return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }

// ---- POSIX pieces ----------------------------------------------------------------------------

class PosixShm : public shm_clean_test {};

TEST_F(PosixShm, TwoMappingsOfOneMemfdShareBytes) {
  const std::size_t bytes = 3 * 4096 + 5;
  wmd::unique_fd fd = wmd::create_shared_memory("wholestore-test", bytes);
  ASSERT_TRUE(fd.valid());
  EXPECT_TRUE(close_on_exec(fd.get()));
  struct stat st {};
  ASSERT_EQ(::fstat(fd.get(), &st), 0);
  EXPECT_EQ(static_cast<std::size_t>(st.st_size), bytes);
  char link[256] = {};
  ASSERT_GT(
      ::readlink(("/proc/self/fd/" + std::to_string(fd.get())).c_str(), link, sizeof(link) - 1), 0);
  EXPECT_EQ(std::string(link).rfind("/memfd:wholestore-test", 0), 0u) << link;

  wmd::mapping writer = wmd::map_shared(fd.get(), bytes);
  wmd::mapping reader = wmd::map_shared(fd.get(), bytes);
  ASSERT_NE(writer.get(), reader.get());
  EXPECT_EQ(writer.size(), bytes);
  auto* w = static_cast<unsigned char*>(writer.get());
  const auto* r = static_cast<const unsigned char*>(reader.get());
  for (std::size_t i = 0; i < bytes; ++i) EXPECT_EQ(r[i], 0) << "not zero-filled at " << i;
  for (std::size_t i = 0; i < bytes; ++i) w[i] = static_cast<unsigned char>(i * 7 + 3);
  for (std::size_t i = 0; i < bytes; ++i)
    ASSERT_EQ(r[i], static_cast<unsigned char>(i * 7 + 3)) << "at " << i;

  // Moves transfer ownership; the moved-from objects are empty.
  wmd::mapping moved = std::move(writer);
  EXPECT_EQ(writer.get(), nullptr);
  EXPECT_EQ(writer.size(), 0u);
  EXPECT_EQ(static_cast<unsigned char*>(moved.get())[bytes - 1], r[bytes - 1]);
  wmd::unique_fd other = std::move(fd);
  EXPECT_FALSE(fd.valid());
  EXPECT_TRUE(other.valid());
}

TEST_F(PosixShm, ZeroBytesAndOwnership) {
  wmd::unique_fd fd = wmd::create_shared_memory("empty", 0);
  ASSERT_TRUE(fd.valid());
  wmd::mapping empty = wmd::map_shared(fd.get(), 0);
  EXPECT_EQ(empty.get(), nullptr);
  EXPECT_EQ(empty.size(), 0u);

  const int raw = fd.get();
  int released = fd.release();
  EXPECT_EQ(released, raw);
  EXPECT_FALSE(fd.valid());
  EXPECT_NE(::fcntl(released, F_GETFD), -1) << "release must not close";
  { wmd::unique_fd owner(released); }
  EXPECT_EQ(::fcntl(released, F_GETFD), -1) << "the destructor must close";

  wmd::unique_fd a = wmd::create_shared_memory("a", 1);
  wmd::unique_fd b = wmd::create_shared_memory("b", 1);
  const int b_raw = b.get();
  const int a_raw = a.get();
  a = std::move(b);
  EXPECT_EQ(a.get(), b_raw);
  EXPECT_EQ(::fcntl(a_raw, F_GETFD), -1) << "assignment must close the old descriptor";
}

TEST_F(PosixShm, FailuresThrowSystemError) {
  EXPECT_THROW(wmd::map_shared(-1, 4096), wm::system_error);
  try {
    wmd::create_shared_memory("huge", std::numeric_limits<std::size_t>::max());
    ADD_FAILURE() << "no exception";
  } catch (const wm::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("ftruncate"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::to_string(std::numeric_limits<std::size_t>::max())),
              std::string::npos)
        << e.what();
  }
}

// ---- descriptor exchange and topology ------------------------------------------------------

class FdExchange : public shm_clean_test, public ::testing::WithParamInterface<job> {};

TEST_P(FdExchange, EveryRankSeesEveryMemfd) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    const int n = bs->size(), me = bs->rank();
    const wm::rank_topology topo = wm::discover_topology(*bs);
    // Each rank shares its own file holding its rank, except the last of three or more,
    // which shares nothing.
    const bool shares = !(n >= 3 && me == n - 1);
    wmd::unique_fd own;
    if (shares) {
      own = wmd::create_shared_memory("rank-file", 4096);
      wmd::mapping m = wmd::map_shared(own.get(), 4096);
      std::memcpy(m.get(), &me, sizeof(me));
    }
    std::vector<wmd::unique_fd> fds = wmd::allgather_local_fds(*bs, topo, own.get());
    ASSERT_EQ(fds.size(), static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      const bool expect = !(n >= 3 && r == n - 1);
      ASSERT_EQ(fds[r].valid(), expect) << "entry of rank " << r;
      if (!expect) continue;
      EXPECT_TRUE(close_on_exec(fds[r].get())) << "entry of rank " << r;
      wmd::mapping m = wmd::map_shared(fds[r].get(), 4096);
      int stored = -1;
      std::memcpy(&stored, m.get(), sizeof(stored));
      EXPECT_EQ(stored, r);
    }
    if (shares) {  // own entry: a new descriptor for the same file
      struct stat a {
      }, b{};
      ASSERT_EQ(::fstat(own.get(), &a), 0);
      ASSERT_EQ(::fstat(fds[me].get(), &b), 0);
      EXPECT_NE(own.get(), fds[me].get());
      EXPECT_EQ(a.st_ino, b.st_ino);
    }
  });
}

TEST_P(FdExchange, OneSegmentWrittenByAll) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    const int n = bs->size(), me = bs->rank();
    const wm::rank_topology topo = wm::discover_topology(*bs);
    wmd::unique_fd seg;
    if (me == 0) seg = wmd::create_shared_memory("slots", 4096);
    std::vector<wmd::unique_fd> fds = wmd::allgather_local_fds(*bs, topo, seg.get());
    for (int r = 1; r < n; ++r) EXPECT_FALSE(fds[r].valid());
    ASSERT_TRUE(fds[0].valid());
    wmd::mapping m = wmd::map_shared(fds[0].get(), 4096);
    auto* slots = static_cast<std::int64_t*>(m.get());
    slots[me] = 1000 + me;
    bs->barrier();
    for (int r = 0; r < n; ++r) EXPECT_EQ(slots[r], 1000 + r) << "slot " << r;
    bs->barrier();  // nobody unmaps before everyone has read
  });
}

INSTANTIATE_TEST_SUITE_P(, FdExchange, ::testing::ValuesIn(jobs(1, 4)), job_name);

class Topology : public shm_clean_test, public ::testing::WithParamInterface<job> {};

TEST_P(Topology, OneHost) {
  const job j = GetParam();
  const long parent = static_cast<long>(::getpid());
  run_job(j, [j, parent](std::shared_ptr<wm::bootstrap> bs) {
    const int n = bs->size(), me = bs->rank();
    const wm::rank_topology topo = wm::discover_topology(*bs);
    EXPECT_EQ(topo.num_hosts, 1);
    EXPECT_EQ(topo.local_size, n);
    EXPECT_EQ(topo.local_rank, me);
    std::vector<int> all(n);
    for (int r = 0; r < n; ++r) all[r] = r;
    EXPECT_EQ(topo.local_ranks, all);
    EXPECT_EQ(topo.host_of_rank, std::vector<int>(n, 0));
    ASSERT_EQ(topo.pids.size(), static_cast<std::size_t>(n));
    EXPECT_EQ(topo.pids[me], static_cast<long>(::getpid()));
    if (j.how == mode::thread) {
      EXPECT_EQ(topo.pids, std::vector<long>(n, parent));
    } else {
      EXPECT_EQ(std::set<long>(topo.pids.begin(), topo.pids.end()).size(),
                static_cast<std::size_t>(n));
    }
    EXPECT_EQ(topo.single_process(), j.how == mode::thread || n == 1);

    auto comm = make_comm(bs);
    EXPECT_EQ(comm->rank(), me);
    EXPECT_EQ(comm->size(), n);
    EXPECT_EQ(comm->local_rank(), me);
    EXPECT_EQ(comm->local_size(), n);
    EXPECT_EQ(comm->get_backend(), wm::backend::host);
    EXPECT_EQ(comm->device(), -1);
    EXPECT_EQ(comm->topology().pids, topo.pids);
    EXPECT_EQ(&comm->get_bootstrap(), bs.get());
  });
}

INSTANTIATE_TEST_SUITE_P(, Topology, ::testing::ValuesIn(jobs(1, 4)), job_name);

TEST(TopologyNames, BackendNames) {
  EXPECT_STREQ(wm::backend_name(wm::backend::host), "host");
  EXPECT_STREQ(wm::backend_name(wm::backend::nccl), "nccl");
}

// ---- collectives -----------------------------------------------------------------------------

class HostComm : public shm_clean_test, public ::testing::WithParamInterface<job> {};

std::uint64_t seed_of(int call, int rank) { return 1000003ULL * call + 7919ULL * rank + 17; }

TEST_P(HostComm, Barrier) {
  // A counter in a segment shared by all ranks (inherited over fork, or just shared by
  // threads): after barrier k, every rank must have made its k-th increment.
  wmd::unique_fd fd = wmd::create_shared_memory("barrier-test", 64);
  wmd::mapping m = wmd::map_shared(fd.get(), 64);
  auto* counter = new (m.get()) std::atomic<int>(0);
  run_job(GetParam(), [counter](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size();
    for (int round = 1; round <= 20; ++round) {
      // Uneven arrival: the later ranks dawdle, so a broken barrier would let rank 0 through.
      if (round % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(comm->rank()));
      counter->fetch_add(1);
      comm->barrier(nullptr);
      EXPECT_GE(counter->load(), n * round) << "round " << round;
      comm->barrier(nullptr);  // nobody starts the next round before all have checked
    }
  });
}

TEST_P(HostComm, BroadcastAllDtypes) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size(), me = comm->rank();
    random_stream shared(42);  // same sequence on every rank
    int call = 0;
    for (dtype t : all_dtypes) {
      for (std::size_t count : test_counts(t, shared)) {
        const int root = static_cast<int>(shared.below(n));
        ++call;
        auto expected = random_elements(t, count, seed_of(call, root));
        auto buffer = me == root ? expected : random_elements(t, count, seed_of(call, me));
        comm->broadcast(buffer.data(), count, t, root, nullptr);
        EXPECT_TRUE(buffer == expected)
            << wm::dtype_name(t) << " count " << count << " root " << root;
      }
    }
  });
}

TEST_P(HostComm, AllgatherAllDtypes) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size(), me = comm->rank();
    random_stream shared(43);
    int call = 0;
    for (dtype t : all_dtypes) {
      for (std::size_t count : test_counts(t, shared)) {
        ++call;
        const std::size_t bytes = count * element_size(t);
        std::vector<unsigned char> expected;
        for (int r = 0; r < n; ++r) {
          auto part = random_elements(t, count, seed_of(call, r));
          expected.insert(expected.end(), part.begin(), part.end());
        }
        auto send = random_elements(t, count, seed_of(call, me));
        std::vector<unsigned char> recv(n * bytes + 1, 0xab);  // one guard byte
        comm->allgather(send.data(), recv.data(), count, t, nullptr);
        EXPECT_EQ(recv.back(), 0xab) << "wrote past the end";
        recv.pop_back();
        EXPECT_TRUE(recv == expected) << wm::dtype_name(t) << " count " << count;
      }
    }
  });
}

TEST_P(HostComm, AllreduceSumAllDtypes) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size(), me = comm->rank();
    random_stream shared(44);
    int call = 0;
    for (dtype t : all_dtypes) {
      for (std::size_t count : test_counts(t, shared)) {
        ++call;
        std::vector<std::vector<unsigned char>> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(random_elements(t, count, seed_of(call, r)));
        const auto expected = reference_sum(t, inputs);
        // Out of place, then in place (send == recv).
        std::vector<unsigned char> recv(count * element_size(t), 0xcd);
        comm->allreduce_sum(inputs[me].data(), recv.data(), count, t, nullptr);
        EXPECT_TRUE(recv == expected) << wm::dtype_name(t) << " count " << count;
        std::vector<unsigned char> in_place = inputs[me];
        comm->allreduce_sum(in_place.data(), in_place.data(), count, t, nullptr);
        EXPECT_TRUE(in_place == expected) << wm::dtype_name(t) << " in place, count " << count;
        if (recv != expected && count > 0) {
          for (std::size_t i = 0; i < recv.size(); ++i) {
            if (recv[i] != expected[i]) {
              ADD_FAILURE() << wm::dtype_name(t) << " first wrong byte " << i;
              break;
            }
          }
        }
      }
    }
  });
}

TEST_P(HostComm, AllreduceSum16BitFloatsEveryEncoding) {
  // Every finite encoding once: rank 0 contributes them in order and the others +0, which
  // must give them back unchanged (except -0 + 0 = +0); then every rank contributes them
  // rotated, which reaches subnormal sums, ties, and overflow to infinity.
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size(), me = comm->rank();
    for (dtype t : {dtype::float16, dtype::bfloat16}) {
      const std::uint16_t exponent_mask = t == dtype::float16 ? 0x7c00 : 0x7f80;
      std::vector<std::uint16_t> finite;
      for (std::uint32_t b = 0; b < 65536; ++b)
        if ((b & exponent_mask) != exponent_mask) finite.push_back(static_cast<std::uint16_t>(b));

      std::vector<std::uint16_t> mine =
          me == 0 ? finite : std::vector<std::uint16_t>(finite.size());
      std::vector<std::uint16_t> sum(finite.size());
      comm->allreduce_sum(mine.data(), sum.data(), finite.size(), t, nullptr);
      for (std::size_t i = 0; i < finite.size(); ++i) {
        const std::uint16_t want = n > 1 && finite[i] == 0x8000 ? 0 : finite[i];
        ASSERT_EQ(sum[i], want) << wm::dtype_name(t) << " encoding " << finite[i];
      }

      std::vector<std::vector<unsigned char>> inputs;
      for (int r = 0; r < n; ++r) {
        std::vector<std::uint16_t> rotated(finite.size());
        for (std::size_t i = 0; i < finite.size(); ++i)
          rotated[i] = finite[(i + 7919 * static_cast<std::size_t>(r)) % finite.size()];
        inputs.push_back(bytes_of(rotated));
      }
      const auto expected = reference_sum(t, inputs);
      std::vector<unsigned char> got(expected.size());
      comm->allreduce_sum(inputs[me].data(), got.data(), finite.size(), t, nullptr);
      EXPECT_TRUE(got == expected) << wm::dtype_name(t) << " rotated sums";
    }
  });
}

/// Random per-pair counts (a matrix every rank derives from one seed), sent from scattered
/// send displacements into scattered receive displacements, with guard bytes in the gaps.
void alltoallv_case(wm::communicator& comm, dtype t, int call, std::size_t max_count,
                    random_stream& shared) {
  const int n = comm.size(), me = comm.rank();
  const std::size_t es = element_size(t);
  std::vector<std::size_t> counts(n * n);
  for (auto& c : counts) c = shared.below(4) == 0 ? 0 : shared.below(max_count + 1);
  auto count = [&](int from, int to) { return counts[from * n + to]; };
  auto pair_seed = [&](int from, int to) { return seed_of(call, from * 64 + to); };

  // Send segments in reverse destination order with gaps; receive segments in rank order
  // with gaps.
  std::vector<std::size_t> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
  std::size_t send_total = 0, recv_total = 0;
  for (int j = n - 1; j >= 0; --j) {
    send_counts[j] = count(me, j);
    send_total += shared.below(3);
    send_displs[j] = send_total;
    send_total += send_counts[j];
  }
  for (int i = 0; i < n; ++i) {
    recv_counts[i] = count(i, me);
    recv_total += shared.below(3);
    recv_displs[i] = recv_total;
    recv_total += recv_counts[i];
  }
  recv_total += 1;
  std::vector<unsigned char> send(send_total * es, 0);
  for (int j = 0; j < n; ++j) {
    auto part = random_elements(t, count(me, j), pair_seed(me, j));
    std::copy(part.begin(), part.end(), send.begin() + send_displs[j] * es);
  }
  std::vector<unsigned char> recv(recv_total * es, 0xee);
  std::vector<unsigned char> expected = recv;
  for (int i = 0; i < n; ++i) {
    auto part = random_elements(t, count(i, me), pair_seed(i, me));
    std::copy(part.begin(), part.end(), expected.begin() + recv_displs[i] * es);
  }
  comm.alltoallv(send.data(), send_counts.data(), send_displs.data(), recv.data(),
                 recv_counts.data(), recv_displs.data(), t, nullptr);
  EXPECT_TRUE(recv == expected) << wm::dtype_name(t) << " max count " << max_count;
}

TEST_P(HostComm, AlltoallvAllDtypes) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size();
    random_stream shared(45);
    int call = 0;
    for (dtype t : all_dtypes) {
      const std::size_t es = element_size(t);
      // All zero, small, and large enough that rank streams span several slots.
      for (std::size_t max_count : {std::size_t{0}, std::size_t{1}, std::size_t{300},
                                    (slot + slot / 2) / es / static_cast<std::size_t>(n)}) {
        alltoallv_case(*comm, t, ++call, max_count, shared);
      }
    }
  });
}

TEST_P(HostComm, SplitByParityAndHost) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size(), me = comm->rank();
    // Key n - rank orders each group in reverse.
    std::vector<int> group;
    for (int r = n - 1; r >= 0; --r)
      if (r % 2 == me % 2) group.push_back(r);
    auto sub = comm->split(me % 2, n - me);
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(), static_cast<int>(group.size()));
    EXPECT_EQ(sub->rank(),
              static_cast<int>(std::find(group.begin(), group.end(), me) - group.begin()));
    EXPECT_EQ(sub->get_backend(), wm::backend::host);
    std::int64_t mine = 100 + me;
    std::vector<std::int64_t> gathered(group.size());
    sub->allgather(&mine, gathered.data(), 1, dtype::int64, nullptr);
    for (std::size_t i = 0; i < group.size(); ++i) EXPECT_EQ(gathered[i], 100 + group[i]);
    std::int64_t sum = 0;
    sub->allreduce_sum(&mine, &sum, 1, dtype::int64, nullptr);
    std::int64_t expected = 0;
    for (int r : group) expected += 100 + r;
    EXPECT_EQ(sum, expected);
    // The parent keeps working beside its child.
    std::int64_t total = 0;
    comm->allreduce_sum(&mine, &total, 1, dtype::int64, nullptr);
    EXPECT_EQ(total, 100LL * n + n * (n - 1) / 2);

    // Rank 0 opts out with a negative color.
    auto rest = comm->split(me == 0 ? -1 : 0, me);
    EXPECT_EQ(rest == nullptr, me == 0);
    if (rest) {
      EXPECT_EQ(rest->size(), n - 1);
      EXPECT_EQ(rest->rank(), me - 1);
    }

    auto host = comm->split_by_host();
    ASSERT_NE(host, nullptr);
    EXPECT_EQ(host->size(), n);
    EXPECT_EQ(host->rank(), me);
  });
}

INSTANTIATE_TEST_SUITE_P(, HostComm, ::testing::ValuesIn(jobs(1, 4)), job_name);

// ---- argument mismatches -------------------------------------------------------------------

class HostCommMismatch : public shm_clean_test, public ::testing::WithParamInterface<job> {};

/// Runs `call`, which must throw mismatch_error mentioning every string in `words`, then
/// checks that the communicator still works: every rank passed the same barriers.
void expect_mismatch(wm::communicator& comm, const std::function<void()>& call,
                     const std::vector<std::string>& words) {
  try {
    call();
    ADD_FAILURE() << "rank " << comm.rank() << ": no mismatch_error";
  } catch (const wm::mismatch_error& e) {
    for (const std::string& w : words)
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "rank " << comm.rank() << ": '" << w << "' not in: " << e.what();
  }
  std::int32_t one = 1, sum = 0;
  comm.allreduce_sum(&one, &sum, 1, dtype::int32, nullptr);
  EXPECT_EQ(sum, comm.size());
}

TEST_P(HostCommMismatch, EveryRankThrows) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size(), me = comm->rank(), last = n - 1;
    std::vector<std::int32_t> send(12, me), recv(12 * n);

    // Different counts: "allgather #1: rank 0 count 10, rank <last> count 12".
    expect_mismatch(*comm,
                    [&] {
                      comm->allgather(send.data(), recv.data(), me == last ? 12 : 10, dtype::int32,
                                      nullptr);
                    },
                    {"allgather", "rank 0 count 10", "rank " + std::to_string(last) + " count 12"});

    // Different operations.
    expect_mismatch(*comm,
                    [&] {
                      if (me == last)
                        comm->broadcast(send.data(), 12, dtype::int32, 0, nullptr);
                      else
                        comm->allgather(send.data(), recv.data(), 12, dtype::int32, nullptr);
                    },
                    {"broadcast", "allgather"});

    // Different dtypes and different roots.
    expect_mismatch(*comm,
                    [&] {
                      comm->allreduce_sum(send.data(), recv.data(), 4,
                                          me == last ? dtype::float32 : dtype::int32, nullptr);
                    },
                    {"allreduce_sum", "dtype"});
    expect_mismatch(
        *comm, [&] { comm->broadcast(send.data(), 4, dtype::int32, me == last ? 1 : 0, nullptr); },
        {"root"});

    // alltoallv: rank 0 expects one element more from the last rank than it sends.
    std::vector<std::size_t> counts(n, 1), displs(n);
    for (int r = 0; r < n; ++r) displs[r] = 2 * r;
    std::vector<std::size_t> recv_counts = counts;
    if (me == 0) recv_counts[last] = 2;
    std::vector<std::int32_t> a2a_send(2 * n, me), a2a_recv(2 * n, -1);
    expect_mismatch(
        *comm,
        [&] {
          comm->alltoallv(a2a_send.data(), counts.data(), displs.data(), a2a_recv.data(),
                          recv_counts.data(), displs.data(), dtype::int32, nullptr);
        },
        {"alltoallv", "rank " + std::to_string(last) + " sends 1 elements to rank 0", "expects 2"});
  });
}

TEST_P(HostCommMismatch, BadArgumentOnOneRankFailsAll) {
  run_job(GetParam(), [](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = make_comm(bs);
    const int n = comm->size(), me = comm->rank();
    std::vector<std::int32_t> buffer(4, me);
    // The last rank passes a root out of range; every rank learns it and throws logic_error
    // instead of the others waiting for a rank that already gave up.
    const int root = me == n - 1 ? n : 0;
    try {
      comm->broadcast(buffer.data(), 4, dtype::int32, root, nullptr);
      ADD_FAILURE() << "rank " << me << ": no logic_error";
    } catch (const wm::mismatch_error& e) {
      ADD_FAILURE() << "rank " << me << ": a bad argument is not a mismatch: " << e.what();
    } catch (const wm::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
    }
    comm->broadcast(buffer.data(), 4, dtype::int32, n - 1, nullptr);
    EXPECT_EQ(buffer, std::vector<std::int32_t>(4, n - 1));
  });
}

INSTANTIATE_TEST_SUITE_P(, HostCommMismatch, ::testing::ValuesIn(jobs(2, 4)), job_name);

// ---- dead and missing peers ----------------------------------------------------------------

class HostCommFailure : public shm_clean_test, public ::testing::WithParamInterface<int> {};

TEST_P(HostCommFailure, KilledProcessIsDetectedQuickly) {
  const int n = GetParam();
  // The bootstrap timeout is long; the liveness checks must end the wait long before it.
  auto result = wholestore_test::fork_ranks(
      n,
      [](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = make_comm(bs);
        comm->barrier(nullptr);
        if (comm->rank() == comm->size() - 1) ::raise(SIGKILL);
        std::vector<float> data(16, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        try {
          comm->allreduce_sum(data.data(), data.data(), data.size(), dtype::float32, nullptr);
          ADD_FAILURE() << "rank " << comm->rank() << ": no timeout_error";
        } catch (const wm::timeout_error& e) {
          EXPECT_LT(std::chrono::steady_clock::now() - start, 5s) << e.what();
          // Either this rank saw the death itself, or a peer that saw it aborted.
          const std::string what = e.what();
          EXPECT_TRUE(what.find("died") != std::string::npos ||
                      what.find("gave up") != std::string::npos)
              << what;
        }
        // The communicator is aborted: further calls fail at once.
        const auto again = std::chrono::steady_clock::now();
        EXPECT_THROW(comm->barrier(nullptr), wm::timeout_error);
        EXPECT_LT(std::chrono::steady_clock::now() - again, 1s);
      },
      30s);
  for (int r = 0; r + 1 < n; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r;
  EXPECT_EQ(result.status[n - 1], 128 + SIGKILL);
}

TEST_P(HostCommFailure, MissingThreadTimesOut) {
  const int n = GetParam();
  const auto timeout = 1500ms;
  std::atomic<int> finished{0};
  wholestore_test::thread_ranks(
      n,
      [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = make_comm(bs);
        comm->barrier(nullptr);
        if (comm->rank() == n - 1) {
          // Stays alive (its thread cannot be told apart from the others) but never arrives.
          while (finished.load() < n - 1) std::this_thread::sleep_for(10ms);
          return;
        }
        std::vector<std::int64_t> send(8, 1), recv(8 * n);
        const auto start = std::chrono::steady_clock::now();
        try {
          comm->allgather(send.data(), recv.data(), send.size(), dtype::int64, nullptr);
          ADD_FAILURE() << "rank " << comm->rank() << ": no timeout_error";
        } catch (const wm::timeout_error& e) {
          const auto waited = std::chrono::steady_clock::now() - start;
          EXPECT_LT(waited, timeout + 2s) << e.what();
          const std::string what = e.what();
          // The first rank to give up waited the full timeout; the others may stop as soon as it
          // marks the communicator aborted.
          if (what.find("timed out") != std::string::npos) {
            EXPECT_GE(waited, timeout - 50ms) << what;
            EXPECT_NE(what.find(std::to_string(n - 1) + " (pid"), std::string::npos) << what;
          } else {
            EXPECT_NE(what.find("gave up"), std::string::npos) << what;
          }
        }
        finished.fetch_add(1);
      },
      timeout);
}

INSTANTIATE_TEST_SUITE_P(, HostCommFailure, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "ranks" + std::to_string(info.param);
                         });

}  // namespace
