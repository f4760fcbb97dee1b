// The seed-compatible API end to end on host memory: status codes, the single-process and
// multi-process modes, chunked handles through PtrGen, rank subsets and a user-supplied
// CollectiveCommunicator.  Multi-process cases fork real processes (the API keeps one global
// state per process).
#include "common/multiprocess.hpp"

#include <wholememory/seed_api.hpp>

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace whole_memory;

namespace {

std::uint64_t value_at(std::size_t i) { return i * 0x9E3779B97F4A7C15ull + 17; }

#define EXPECT_WM_OK(call) EXPECT_EQ((call), WM_SUCCESS) << #call << ": " << WmLastErrorMessage()
#define ASSERT_WM_OK(call) ASSERT_EQ((call), WM_SUCCESS) << #call << ": " << WmLastErrorMessage()

// A CollectiveCommunicator of the caller's own: every pair of ranks shares a socketpair made
// before fork.  Independent of wholestore's bootstraps.
class socket_communicator : public CollectiveCommunicator {
 public:
  explicit socket_communicator(std::vector<std::vector<int>> fds) : fds_(std::move(fds)) {}
  void SetRankAndSize(int rank, int size) override {
    rank_ = rank;
    size_ = size;
  }
  int Rank() override { return rank_; }
  int Size() override { return size_; }
  void AllToAll(const void* send_buf, int send_size, void* recv_buf, int recv_size,
                const int* ranks, int rank_count) override {
    std::vector<int> group = members(ranks, rank_count);
    const char* out = static_cast<const char*>(send_buf);
    char* in = static_cast<char*>(recv_buf);
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (group[i] == rank_) {
        std::memcpy(in + i * recv_size, out + i * send_size, send_size);
      } else {
        write_all(fds_[rank_][group[i]], out + i * send_size, send_size);
      }
    }
    for (std::size_t i = 0; i < group.size(); ++i)
      if (group[i] != rank_) read_all(fds_[rank_][group[i]], in + i * recv_size, recv_size);
  }
  void Barrier(const int* ranks, int rank_count) override {
    std::vector<int> group = members(ranks, rank_count);
    std::vector<char> send(group.size()), recv(group.size());
    AllToAll(send.data(), 1, recv.data(), 1, ranks, rank_count);
  }

 private:
  std::vector<int> members(const int* ranks, int rank_count) const {
    std::vector<int> group;
    if (ranks == nullptr || rank_count == 0) {
      for (int r = 0; r < size_; ++r) group.push_back(r);
    } else {
      group.assign(ranks, ranks + rank_count);
    }
    return group;
  }
  static void write_all(int fd, const char* p, std::size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd, p, n);
      ASSERT_GT(w, 0);
      p += w;
      n -= static_cast<std::size_t>(w);
    }
  }
  static void read_all(int fd, char* p, std::size_t n) {
    while (n > 0) {
      ssize_t r = ::read(fd, p, n);
      ASSERT_GT(r, 0);
      p += r;
      n -= static_cast<std::size_t>(r);
    }
  }
  std::vector<std::vector<int>> fds_;
  int rank_ = 0, size_ = 1;
};

// What every rank does in the multi-process checks, whichever communicator it uses.
void multi_process_body(int rank, int ranks) {
  // WmmpMallocHost: each rank writes its share, everyone reads all.
  const std::size_t elems = 100000 + 3;
  void* ptr = nullptr;
  ASSERT_WM_OK(WmmpMallocHost(&ptr, elems * sizeof(std::uint64_t)));
  ASSERT_NE(ptr, nullptr);
  EXPECT_TRUE(WmmpCanAccessFrom(ptr, -1));
  auto* data = static_cast<std::uint64_t*>(ptr);
  for (std::size_t i = rank; i < elems; i += ranks) data[i] = value_at(i);
  ASSERT_WM_OK(WmmpBarrier());
  for (std::size_t i = 0; i < elems; ++i) ASSERT_EQ(data[i], value_at(i)) << "element " << i;

  // WcmmpMallocHost + the handle through PtrGen, granularity of a 24-byte row.
  WholeChunkedMemory_t chunked = nullptr;
  const std::size_t rows = 5001, row_elems = 3;
  ASSERT_WM_OK(WcmmpMallocHost(&chunked, rows * row_elems * sizeof(std::uint64_t), 24));
  WholeChunkedMemoryHandle* handle = GetDeviceChunkedHandle(chunked, -1);
  ASSERT_NE(handle, nullptr) << WmLastErrorMessage();
  PtrGen<const WholeChunkedMemoryHandle, std::uint64_t> gen(handle);
  for (std::size_t row = rank; row < rows; row += ranks)
    for (std::size_t c = 0; c < row_elems; ++c)
      *gen.At(row * row_elems + c) = value_at(row * 7 + c);
  ASSERT_WM_OK(WmmpBarrier());
  for (std::size_t row = 0; row < rows; ++row)
    for (std::size_t c = 0; c < row_elems; ++c)
      ASSERT_EQ(*gen.At(row * row_elems + c), value_at(row * 7 + c));
  // Chunk boundaries are whole rows (48 = lcm(24, 16) bytes).
  for (int p = 1; p < handle->num_parts; ++p) EXPECT_EQ(handle->offsets[p] % 48, 0u);

  // A subset of the ranks: only the members call.
  if (ranks >= 3) {
    const int subset[2] = {0, 2};
    if (rank == 0 || rank == 2) {
      void* sub = nullptr;
      ASSERT_WM_OK(WmmpMallocHost(&sub, 4096, subset, 2));
      auto* bytes = static_cast<unsigned char*>(sub);
      bytes[rank == 0 ? 0 : 4095] = static_cast<unsigned char>(rank + 1);
      ASSERT_WM_OK(WmmpBarrier(subset, 2));
      EXPECT_EQ(bytes[0], 1);
      EXPECT_EQ(bytes[4095], 3);
      ASSERT_WM_OK(WmmpFree(sub));
    }
    // A ranks list without the caller is refused.
    if (rank == 1) {
      void* sub = nullptr;
      EXPECT_EQ(WmmpMallocHost(&sub, 64, subset, 2), WM_ERROR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(WmLastErrorMessage()).find("does not contain"), std::string::npos);
    }
  }

  // Freeing something unknown is an error, not a crash.
  int local = 0;
  EXPECT_EQ(WmmpFree(&local), WM_ERROR_INVALID_ARGUMENT);
  ASSERT_WM_OK(WmmpFree(ptr));
  // `chunked` is left for WmmpFinalize to free.
}

}  // namespace

TEST(SeedApi, StatusCodesBeforeInit) {
  void* p = nullptr;
  EXPECT_EQ(WmspMallocHost(&p, 64), WM_ERROR_NOT_INITIALIZED);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(WmLastErrorMessage()).find("WholeMemoryInit"), std::string::npos);
  EXPECT_EQ(WmmpInit(0, 1), WM_ERROR_NOT_INITIALIZED);
  EXPECT_STREQ(WmStatusName(WM_ERROR_TIMEOUT), "WM_ERROR_TIMEOUT");
}

TEST(SeedApi, SingleProcessHost) {
  ASSERT_WM_OK(WholeMemoryInit());
  EXPECT_EQ(WholeMemoryInit(), WM_ERROR_NOT_INITIALIZED);  // twice
  void* p = nullptr;
  const std::size_t n = (1 << 20) + 5;
  ASSERT_WM_OK(WmspMallocHost(&p, n * sizeof(std::uint64_t)));
  auto* v = static_cast<std::uint64_t*>(p);
  for (std::size_t i = 0; i < n; ++i) v[i] = value_at(i);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], value_at(i));
  EXPECT_EQ(WmspMallocHost(&p, 0), WM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(WmspMallocHost(nullptr, 64), WM_ERROR_INVALID_ARGUMENT);
  int local = 0;
  EXPECT_EQ(WmspFree(&local), WM_ERROR_INVALID_ARGUMENT);
  ASSERT_WM_OK(WmspFree(v));
  // Finalize frees what is left.
  void* leftover = nullptr;
  ASSERT_WM_OK(WmspMallocHost(&leftover, 4096));
  ASSERT_WM_OK(WholeMemoryFinalize());
  EXPECT_EQ(WholeMemoryFinalize(), WM_ERROR_NOT_INITIALIZED);
}

TEST(SeedApi, MultiProcessOverTcp) {
  for (int ranks : {1, 2, 3, 4}) {
    wholestore_test::fork_with_master_env(ranks, [ranks](int rank) {
      ASSERT_WM_OK(WholeMemoryInit());
      ASSERT_WM_OK(WmmpInit(rank, ranks));
      EXPECT_EQ(WmmpInit(rank, ranks), WM_ERROR_NOT_INITIALIZED);
      multi_process_body(rank, ranks);
      ASSERT_WM_OK(WmmpFinalize());
      ASSERT_WM_OK(WholeMemoryFinalize());
    });
  }
}

TEST(SeedApi, MultiProcessWithUserCommunicator) {
  const int ranks = 3;
  std::vector<std::vector<int>> fds(ranks, std::vector<int>(ranks, -1));
  for (int a = 0; a < ranks; ++a)
    for (int b = a + 1; b < ranks; ++b) {
      int sv[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
      fds[a][b] = sv[0];
      fds[b][a] = sv[1];
    }
  wholestore_test::fork_with_master_env(ranks, [&](int rank) {
    ASSERT_WM_OK(WholeMemoryInit());
    ASSERT_WM_OK(WmmpInit(rank, ranks, new socket_communicator(fds)));
    multi_process_body(rank, ranks);
    ASSERT_WM_OK(WholeMemoryFinalize());  // also finalizes the multi-process mode
  });
  for (auto& row : fds)
    for (int fd : row)
      if (fd >= 0) ::close(fd);
}

TEST(SeedApi, MismatchedSizesReportMismatch) {
  wholestore_test::fork_with_master_env(2, [](int rank) {
    ASSERT_WM_OK(WholeMemoryInit());
    ASSERT_WM_OK(WmmpInit(rank, 2));
    void* p = nullptr;
    EXPECT_EQ(WmmpMallocHost(&p, rank == 0 ? 1024 : 2048), WM_ERROR_MISMATCH);
    EXPECT_EQ(p, nullptr);
    ASSERT_WM_OK(WholeMemoryFinalize());
  });
}
