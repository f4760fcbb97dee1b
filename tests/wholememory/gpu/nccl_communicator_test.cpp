/*
 * The NCCL communicator against host references on random data, in one and two forked
 * processes (one GPU each): every collective and dtype path (int16 moved as bytes, refused for
 * allreduce), alltoallv with random counts including zeros, split, argument mismatches (which
 * must throw mismatch_error on every rank) and a peer that dies (timeout_error on the other).
 */
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

using wholememory::bootstrap;
using wholememory::communicator;
using wholememory::dtype;

/// Deterministic seed from a few numbers, so every rank can rebuild every rank's input.
std::uint64_t seed_of(std::uint64_t a, std::uint64_t b, std::uint64_t c = 0) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull;
  for (std::uint64_t v : {a, b, c}) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
  }
  return h;
}

/// `count` elements of `element` random bytes each.
std::vector<unsigned char> random_bytes(std::size_t count, std::size_t element,
                                        std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<unsigned char> bytes(count * element);
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(rng());
  return bytes;
}

/// Values whose sums over a few ranks are exact in every arithmetic type.
template <typename T>
std::vector<T> random_small_values(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> dist(-1000, 1000);
  std::vector<T> values(count);
  for (T& v : values) v = static_cast<T>(dist(rng));
  return values;
}

void upload(void* device_ptr, const void* host, std::size_t bytes) {
  if (bytes > 0) WM_CUDA_TRY(copy_and_wait(device_ptr, host, bytes, cudaMemcpyHostToDevice));
}

std::vector<unsigned char> download(const void* device_ptr, std::size_t bytes) {
  std::vector<unsigned char> host(bytes);
  if (bytes > 0) WM_CUDA_TRY(copy_and_wait(host.data(), device_ptr, bytes, cudaMemcpyDeviceToHost));
  return host;
}

/// A rank of an NCCL test: its GPU, communicator and stream.
struct nccl_rank {
  int device;
  std::shared_ptr<communicator> comm;
};

nccl_rank make_rank(std::shared_ptr<bootstrap> bs) {
  int count = 0;
  WM_CUDA_TRY(cudaGetDeviceCount(&count));
  const int device = bs->rank() % count;
  WM_CUDA_TRY(cudaSetDevice(device));
  return {device, wholememory::make_nccl_communicator(std::move(bs), device)};
}

template <typename T>
void check_allreduce(communicator& comm, int device, dtype type, std::size_t count, bool in_place,
                     cudaStream_t stream) {
  SCOPED_TRACE(std::string("allreduce_sum ") + wholememory::dtype_name(type) +
               (in_place ? " in place" : ""));
  const int n = comm.size();
  std::vector<T> expected(count, T(0));
  std::vector<T> mine;
  for (int r = 0; r < n; ++r) {
    std::vector<T> values = random_small_values<T>(count, seed_of(1, r, count));
    for (std::size_t i = 0; i < count; ++i) expected[i] = static_cast<T>(expected[i] + values[i]);
    if (r == comm.rank()) mine = values;
  }
  device_buffer send(count * sizeof(T), device);
  device_buffer recv(count * sizeof(T), device);
  upload(send.get(), mine.data(), count * sizeof(T));
  void* out = in_place ? send.get() : recv.get();
  comm.allreduce_sum(send.get(), out, count, type, stream);
  comm.synchronize(stream);
  std::vector<unsigned char> got = download(out, count * sizeof(T));
  ASSERT_EQ(got.size(), expected.size() * sizeof(T));
  if (count > 0) {
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), got.size()));
  }
}

void check_broadcast(communicator& comm, int device, dtype type, std::size_t count, int root,
                     cudaStream_t stream) {
  SCOPED_TRACE(std::string("broadcast ") + wholememory::dtype_name(type) + " from root " +
               std::to_string(root));
  const std::size_t element = wholememory::dtype_size(type);
  std::vector<unsigned char> root_data = random_bytes(count, element, seed_of(2, root, count));
  std::vector<unsigned char> mine =
      comm.rank() == root ? root_data : random_bytes(count, element, seed_of(3, comm.rank()));
  device_buffer buffer(count * element, device);
  upload(buffer.get(), mine.data(), mine.size());
  comm.broadcast(buffer.get(), count, type, root, stream);
  comm.synchronize(stream);
  EXPECT_EQ(download(buffer.get(), count * element), root_data);
}

void check_allgather(communicator& comm, int device, dtype type, std::size_t count,
                     cudaStream_t stream) {
  SCOPED_TRACE(std::string("allgather ") + wholememory::dtype_name(type) + " of " +
               std::to_string(count));
  const int n = comm.size();
  const std::size_t element = wholememory::dtype_size(type);
  std::vector<unsigned char> expected;
  std::vector<unsigned char> mine;
  for (int r = 0; r < n; ++r) {
    std::vector<unsigned char> data = random_bytes(count, element, seed_of(4, r, count));
    expected.insert(expected.end(), data.begin(), data.end());
    if (r == comm.rank()) mine = data;
  }
  device_buffer send(count * element, device);
  device_buffer recv(n * count * element, device);
  upload(send.get(), mine.data(), mine.size());
  comm.allgather(send.get(), recv.get(), count, type, stream);
  comm.synchronize(stream);
  EXPECT_EQ(download(recv.get(), n * count * element), expected);
}

/// Elements rank `from` sends to rank `to` (some zero).
std::size_t a2a_count(int from, int to, std::uint64_t salt) {
  const std::uint64_t h = seed_of(5, from * 1000 + to, salt);
  return h % 4 == 0 ? 0 : static_cast<std::size_t>(h % 3001);
}

void check_alltoallv(communicator& comm, int device, dtype type, std::uint64_t salt,
                     cudaStream_t stream) {
  SCOPED_TRACE(std::string("alltoallv ") + wholememory::dtype_name(type));
  const int n = comm.size();
  const int me = comm.rank();
  const std::size_t element = wholememory::dtype_size(type);
  constexpr std::size_t gap = 3;  // displacements leave gaps, so they are really used
  std::vector<std::size_t> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
  std::size_t send_total = 0;
  std::size_t recv_total = 0;
  for (int j = 0; j < n; ++j) {
    send_counts[j] = a2a_count(me, j, salt);
    send_displs[j] = send_total;
    send_total += send_counts[j] + gap;
    recv_counts[j] = a2a_count(j, me, salt);
    recv_displs[j] = recv_total;
    recv_total += recv_counts[j] + gap;
  }
  std::vector<unsigned char> send_host(send_total * element, 0xEE);
  std::vector<unsigned char> expected(recv_total * element, 0xCD);
  for (int j = 0; j < n; ++j) {
    std::vector<unsigned char> to_j = random_bytes(send_counts[j], element, seed_of(6, me, j));
    std::copy(to_j.begin(), to_j.end(), send_host.begin() + send_displs[j] * element);
    std::vector<unsigned char> from_j = random_bytes(recv_counts[j], element, seed_of(6, j, me));
    std::copy(from_j.begin(), from_j.end(), expected.begin() + recv_displs[j] * element);
  }
  device_buffer send(send_host.size(), device);
  device_buffer recv(expected.size(), device);
  upload(send.get(), send_host.data(), send_host.size());
  std::vector<unsigned char> filler(expected.size(), 0xCD);
  upload(recv.get(), filler.data(), filler.size());
  comm.alltoallv(send.get(), send_counts.data(), send_displs.data(), recv.get(), recv_counts.data(),
                 recv_displs.data(), type, stream);
  comm.synchronize(stream);
  EXPECT_EQ(download(recv.get(), expected.size()), expected);
}

void collectives_body(std::shared_ptr<bootstrap> bs) {
  const int expected_size = bs->size();
  const int expected_rank = bs->rank();
  nccl_rank rank = make_rank(std::move(bs));
  communicator& comm = *rank.comm;
  EXPECT_EQ(comm.get_backend(), wholememory::backend::nccl);
  EXPECT_EQ(comm.device(), rank.device);
  EXPECT_EQ(comm.size(), expected_size);
  EXPECT_EQ(comm.rank(), expected_rank);
  cuda_stream stream;
  cudaStream_t s = stream.get();

  for (bool in_place : {false, true}) {
    check_allreduce<std::int32_t>(comm, rank.device, dtype::int32, 10007, in_place, s);
    check_allreduce<std::int64_t>(comm, rank.device, dtype::int64, 4099, in_place, s);
    check_allreduce<float>(comm, rank.device, dtype::float32, 65537, in_place, s);
    check_allreduce<double>(comm, rank.device, dtype::float64, 123, in_place, s);
    check_allreduce<std::int8_t>(comm, rank.device, dtype::int8, 77, in_place, s);
  }
  check_allreduce<std::int32_t>(comm, rank.device, dtype::int32, 0, false, s);
  {
    device_buffer buffer(64, rank.device);
    EXPECT_THROW(comm.allreduce_sum(buffer.get(), buffer.get(), 4, dtype::int16, s),
                 wholememory::logic_error);
  }

  for (dtype type : {dtype::int32, dtype::int64, dtype::float16, dtype::int16, dtype::uint8}) {
    for (int root = 0; root < comm.size(); ++root) {
      check_broadcast(comm, rank.device, type, 4097, root, s);
    }
    check_allgather(comm, rank.device, type, 1037, s);
    check_allgather(comm, rank.device, type, 1, s);
    check_allgather(comm, rank.device, type, 0, s);
  }
  for (dtype type : {dtype::int64, dtype::int16, dtype::float32, dtype::bfloat16}) {
    for (std::uint64_t salt = 0; salt < 3; ++salt) {
      check_alltoallv(comm, rank.device, type, salt, s);
    }
  }
  comm.barrier(s);
  comm.synchronize(s);
}

void split_body(std::shared_ptr<bootstrap> bs) {
  nccl_rank rank = make_rank(std::move(bs));
  communicator& comm = *rank.comm;
  const int n = comm.size();
  const int me = comm.rank();
  cuda_stream stream;
  cudaStream_t s = stream.get();

  // Groups by parity, ordered by descending old rank.
  std::shared_ptr<communicator> parity = comm.split(me % 2, -me);
  ASSERT_NE(parity, nullptr);
  EXPECT_EQ(parity->get_backend(), wholememory::backend::nccl);
  std::vector<int> members;
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == me % 2) members.push_back(r);
  ASSERT_EQ(parity->size(), static_cast<int>(members.size()));
  EXPECT_EQ(members[parity->rank()], me);
  {
    device_buffer send(sizeof(std::int64_t), rank.device);
    device_buffer recv(members.size() * sizeof(std::int64_t), rank.device);
    const std::int64_t value = me;
    upload(send.get(), &value, sizeof(value));
    parity->allgather(send.get(), recv.get(), 1, dtype::int64, s);
    parity->synchronize(s);
    std::vector<std::int64_t> got(members.size());
    std::vector<unsigned char> bytes = download(recv.get(), got.size() * sizeof(std::int64_t));
    std::memcpy(got.data(), bytes.data(), bytes.size());
    for (std::size_t i = 0; i < members.size(); ++i) EXPECT_EQ(got[i], members[i]);
  }

  // Rank 0 takes part in no group.
  std::shared_ptr<communicator> without_zero = comm.split(me == 0 ? -1 : 7, me);
  if (me == 0) {
    EXPECT_EQ(without_zero, nullptr);
  } else {
    ASSERT_NE(without_zero, nullptr);
    EXPECT_EQ(without_zero->size(), n - 1);
    EXPECT_EQ(without_zero->rank(), me - 1);
    without_zero->barrier(s);
    without_zero->synchronize(s);
  }
  comm.barrier(s);
  comm.synchronize(s);
}

void mismatch_body(std::shared_ptr<bootstrap> bs) {
  nccl_rank rank = make_rank(std::move(bs));
  communicator& comm = *rank.comm;
  const int me = comm.rank();
  cuda_stream stream;
  cudaStream_t s = stream.get();
  device_buffer a(4096, rank.device);
  device_buffer b(4096, rank.device);

  EXPECT_THROW(comm.allreduce_sum(a.get(), b.get(), me == 0 ? 10 : 11, dtype::int32, s),
               wholememory::mismatch_error);
  EXPECT_THROW(comm.allreduce_sum(a.get(), b.get(), 10, me == 0 ? dtype::int32 : dtype::float32, s),
               wholememory::mismatch_error);
  EXPECT_THROW(comm.broadcast(a.get(), 10, dtype::int32, me, s), wholememory::mismatch_error);
  if (me == 0) {
    EXPECT_THROW(comm.allgather(a.get(), b.get(), 10, dtype::int32, s),
                 wholememory::mismatch_error);
  } else {
    EXPECT_THROW(comm.broadcast(a.get(), 10, dtype::int32, 0, s), wholememory::mismatch_error);
  }

  // Rank 0 sends 5 elements to rank 1, which expects 4.
  std::vector<std::size_t> send_counts = {1, me == 0 ? 5u : 2u};
  std::vector<std::size_t> recv_counts = {me == 0 ? 1u : 4u, 2u};
  if (me == 1) send_counts = {2, 2};
  std::vector<std::size_t> displs = {0, 16};
  EXPECT_THROW(comm.alltoallv(a.get(), send_counts.data(), displs.data(), b.get(),
                              recv_counts.data(), displs.data(), dtype::int32, s),
               wholememory::mismatch_error);

  // The communicator still works after the refused calls.
  check_allreduce<std::int32_t>(comm, rank.device, dtype::int32, 1000, false, s);
  comm.barrier(s);
  comm.synchronize(s);
}

/// Rank 1 dies after a first collective; rank 0's next collective must end in timeout_error.
void dead_peer_body(std::shared_ptr<bootstrap> bs, bool checks) {
  ::setenv("WHOLESTORE_CHECK_COLLECTIVES", checks ? "1" : "0", 1);
  nccl_rank rank = make_rank(std::move(bs));
  communicator& comm = *rank.comm;
  cuda_stream stream;
  cudaStream_t s = stream.get();
  device_buffer buffer(1024, rank.device);
  comm.allreduce_sum(buffer.get(), buffer.get(), 16, dtype::int32, s);
  comm.synchronize(s);
  if (comm.rank() == 1) ::raise(SIGKILL);

  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(
      {
        comm.allreduce_sum(buffer.get(), buffer.get(), 16, dtype::int32, s);
        comm.synchronize(s);
      },
      wholememory::timeout_error);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double limit = std::chrono::duration<double>(comm.timeout()).count() + 30.0;
  EXPECT_LT(waited, limit) << "the timeout error came late";
}

/// Rank 1 dies while both ranks hold a distributed device allocation over NCCL.  Rank 0's next
/// gather needs rank 1's rows: it must fail with timeout_error within about one timeout, and
/// the allocation's destruction afterwards must neither run a collective that cannot complete
/// (a hang) nor crash; the process then exits normally.
void dead_peer_gather_body(std::shared_ptr<bootstrap> bs) {
  std::shared_ptr<bootstrap> keep = bs;
  nccl_rank rank = make_rank(std::move(bs));
  constexpr std::size_t rows = 4096, cols = 16;
  const auto start_all = std::chrono::steady_clock::now();
  {
    wholememory::allocation_options ao;
    ao.granularity = cols * sizeof(float);
    wholememory::allocation table = wholememory::allocation::create(
        rank.comm, rows * cols * sizeof(float), wholememory::memory_type::distributed,
        wholememory::memory_location::device, ao);
    wholememory::wm_tensor t{&table, dtype::float32, rows, cols, cols, 0};
    cuda_stream stream;
    // Indices of rows on both ranks' parts.
    std::vector<std::int64_t> idx(256);
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i * 16);
    device_buffer d_idx(idx.size() * 8, rank.device);
    device_buffer d_out(idx.size() * cols * sizeof(float), rank.device);
    upload(d_idx.get(), idx.data(), idx.size() * 8);
    const wholememory::index_array ia{d_idx.get(), dtype::int64, idx.size()};
    const wholememory::dense_matrix out{d_out.get(), dtype::float32, idx.size(), cols, cols};
    wholememory::gather(t, ia, out, stream.get());  // both alive: works
    WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    rank.comm->barrier(stream.get());
    rank.comm->synchronize(stream.get());
    if (rank.comm->rank() == 1) ::raise(SIGKILL);

    const auto start = std::chrono::steady_clock::now();
    try {
      wholememory::gather(t, ia, out, stream.get());
      WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
      ADD_FAILURE() << "a gather that needs a dead rank's rows succeeded";
    } catch (const wholememory::timeout_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank"), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected timeout_error, got: " << e.what();
    }
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double timeout = std::chrono::duration<double>(rank.comm->timeout()).count();
    EXPECT_LT(waited, timeout + 10.0) << "the error came late";
    EXPECT_TRUE(rank.comm->broken()) << "the communicator should know it is broken";
  }  // the allocation and the stream are destroyed here, after the failure
  rank.comm.reset();
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_all).count();
  EXPECT_LT(total, std::chrono::duration<double>(keep->timeout()).count() * 2 + 20.0)
      << "unwinding after the failure waited out further timeouts";
}

TEST(NcclCommunicator, CollectivesOneProcess) {
  WHOLESTORE_REQUIRE_GPUS(1);
  EXPECT_TRUE(fork_ranks(1, collectives_body).all_ok());
}

TEST(NcclCommunicator, CollectivesTwoProcesses) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(2, collectives_body);
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

// WHOLESTORE_NCCL_NONBLOCKING=1 keeps every collective on the non-blocking communicator (each
// enqueue polled); the collectives give the same results there.
TEST(NcclCommunicator, CollectivesOnTheNonblockingCommunicator) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(2, [](std::shared_ptr<bootstrap> bs) {
    ::setenv("WHOLESTORE_NCCL_NONBLOCKING", "1", 1);
    collectives_body(std::move(bs));
  });
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

// Ranks that disagree on the setting would enqueue on different communicators and hang: the
// creation refuses it on every rank, naming the variable.
TEST(NcclCommunicator, NonblockingSettingMustMatchOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(2, [](std::shared_ptr<bootstrap> bs) {
    if (bs->rank() == 1) {
      ::setenv("WHOLESTORE_NCCL_NONBLOCKING", "1", 1);
    } else {
      ::unsetenv("WHOLESTORE_NCCL_NONBLOCKING");
    }
    try {
      make_rank(std::move(bs));
      ADD_FAILURE() << "ranks with different WHOLESTORE_NCCL_NONBLOCKING made a communicator";
    } catch (const wholememory::mismatch_error& e) {
      EXPECT_NE(std::string(e.what()).find("WHOLESTORE_NCCL_NONBLOCKING"), std::string::npos)
          << e.what();
    }
  });
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

// A value other than 0 or 1 ("false", "yes") fails on every rank, naming the variable, instead
// of being read as one of them.
TEST(NcclCommunicator, NonblockingSettingOtherThan0Or1FailsOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(2, [](std::shared_ptr<bootstrap> bs) {
    const int me = bs->rank();
    if (me == 1) {
      ::setenv("WHOLESTORE_NCCL_NONBLOCKING", "false", 1);
    } else {
      ::unsetenv("WHOLESTORE_NCCL_NONBLOCKING");
    }
    try {
      make_rank(std::move(bs));
      ADD_FAILURE() << "WHOLESTORE_NCCL_NONBLOCKING=false on rank 1 made a communicator";
    } catch (const wholememory::logic_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("WHOLESTORE_NCCL_NONBLOCKING must be 0 or 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      if (me == 1) {
        EXPECT_NE(msg.find("'false'"), std::string::npos) << msg;
      }
    }
  });
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

TEST(NcclCommunicator, SplitOneProcess) {
  WHOLESTORE_REQUIRE_GPUS(1);
  EXPECT_TRUE(fork_ranks(1, split_body).all_ok());
}

TEST(NcclCommunicator, SplitTwoProcesses) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(2, split_body);
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

TEST(NcclCommunicator, MismatchedArgumentsThrowOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(2, mismatch_body);
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

TEST(NcclCommunicator, DeadPeerTimesOutWithChecks) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(
      2, [](std::shared_ptr<bootstrap> bs) { dead_peer_body(std::move(bs), true); },
      std::chrono::seconds(10));
  EXPECT_EQ(result.status[0], 0) << "the surviving rank failed";
  EXPECT_EQ(result.status[1], 128 + SIGKILL) << "rank 1 should have died by SIGKILL";
}

TEST(NcclCommunicator, DeadPeerTimesOutInSynchronize) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(
      2, [](std::shared_ptr<bootstrap> bs) { dead_peer_body(std::move(bs), false); },
      std::chrono::seconds(10));
  EXPECT_EQ(result.status[0], 0) << "the surviving rank failed";
  EXPECT_EQ(result.status[1], 128 + SIGKILL) << "rank 1 should have died by SIGKILL";
}

TEST(NcclCommunicator, DeadPeerDuringDistributedGatherUnwindsCleanly) {
  WHOLESTORE_REQUIRE_GPUS(2);
  fork_result result = fork_ranks(2, dead_peer_gather_body, std::chrono::seconds(10));
  EXPECT_EQ(result.status[0], 0) << "the surviving rank failed or crashed while unwinding";
  EXPECT_EQ(result.status[1], 128 + SIGKILL) << "rank 1 should have died by SIGKILL";
}

// Two ranks on one GPU: NCCL would refuse them deep inside its init ("Duplicate GPU"); the
// communicator refuses first, on every rank, naming the ranks, the GPU and the ways out, and
// the sharing report says what a caller needs to choose the host communicator instead.
TEST(NcclCommunicator, RanksSharingAGpuAreRefusedOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result result = fork_ranks(
      2,
      [](std::shared_ptr<bootstrap> bs) {
        WM_CUDA_TRY(cudaSetDevice(0));
        const wholememory::gpu_sharing sharing = wholememory::describe_gpu_sharing(*bs, 0);
        EXPECT_EQ(sharing.ranks, 2);
        EXPECT_EQ(sharing.gpus, 1);
        EXPECT_EQ(sharing.max_ranks_per_gpu, 2);
        EXPECT_TRUE(sharing.shared());
        EXPECT_NE(sharing.description.find("ranks 0, 1 on GPU 0"), std::string::npos)
            << sharing.description;
        const auto t0 = std::chrono::steady_clock::now();
        try {
          auto comm = wholememory::make_nccl_communicator(bs, 0);
          ADD_FAILURE() << "rank " << bs->rank() << ": two ranks on one GPU were accepted";
        } catch (const wholememory::logic_error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("one GPU per rank"), std::string::npos) << what;
          EXPECT_NE(what.find("CUDA_VISIBLE_DEVICES"), std::string::npos) << what;
          EXPECT_NE(what.find("host communicator"), std::string::npos) << what;
        }
        EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                  10.0);
        // The host communicator serves the same two ranks.
        auto host = wholememory::make_host_communicator(bs);
        EXPECT_EQ(host->size(), 2);
      },
      std::chrono::seconds(60));
  EXPECT_TRUE(result.all_ok()) << "rank statuses " << result.status[0] << ", " << result.status[1];
}

// One rank per GPU (or the CPU): nothing is shared.
TEST(NcclCommunicator, SharingReportOfDistinctGpus) {
  WHOLESTORE_REQUIRE_GPUS(1);
  const int gpus = cuda_device_count_forked();
  const int ranks = std::min(gpus, 2);
  fork_result result = fork_ranks(ranks, [](std::shared_ptr<bootstrap> bs) {
    WM_CUDA_TRY(cudaSetDevice(bs->rank()));
    const wholememory::gpu_sharing sharing = wholememory::describe_gpu_sharing(*bs, bs->rank());
    EXPECT_EQ(sharing.gpus, bs->size());
    EXPECT_EQ(sharing.max_ranks_per_gpu, 1);
    EXPECT_FALSE(sharing.shared());
    EXPECT_TRUE(sharing.description.empty()) << sharing.description;
  });
  EXPECT_TRUE(result.all_ok());
}

}  // namespace
}  // namespace wholestore_test
