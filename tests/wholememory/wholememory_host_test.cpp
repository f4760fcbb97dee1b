// WholeMemory on host memory: every type, 1 to 4 ranks, forked processes and threads.  Each
// rank writes a pattern over its own part and every rank reads back everything it can see.
#include "common/multiprocess.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <dirent.h>
#include <signal.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <tuple>
#include <vector>

using namespace wholememory;
using wholestore_test::fork_ranks;
using wholestore_test::thread_ranks;

namespace {

std::set<std::string> list_dir(const char* path) {
  std::set<std::string> names;
  if (DIR* d = ::opendir(path)) {
    while (dirent* e = ::readdir(d)) names.insert(e->d_name);
    ::closedir(d);
  }
  return names;
}

std::uint32_t pattern(std::size_t i, std::uint32_t salt) {
  std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ salt;
  return static_cast<std::uint32_t>(x ^ (x >> 29));
}

enum class mode { processes, threads };

void run(mode how, int ranks, const wholestore_test::rank_body& body) {
  if (how == mode::processes) {
    auto result = fork_ranks(ranks, body);
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
  } else {
    thread_ranks(ranks, body);
  }
}

// Writes the own part through the type's natural accessor, then checks every visible element.
void write_and_verify(const wholememory::allocation& wm, std::uint32_t salt) {
  const std::size_t elems = wm.size() / sizeof(std::uint32_t);
  part_info mine = wm.local_part();
  std::size_t first = mine.offset / sizeof(std::uint32_t);
  std::size_t count = mine.bytes / sizeof(std::uint32_t);
  if (wm.type() == memory_type::continuous) {
    PtrGen<std::uint32_t, std::uint32_t> gen(wm.data());
    for (std::size_t i = first; i < first + count; ++i) *gen.At(i) = pattern(i, salt);
  } else if (wm.type() == memory_type::chunked) {
    chunked_view view = wm.host_view();
    PtrGen<const chunked_view, std::uint32_t> gen(&view);
    for (std::size_t i = first; i < first + count; ++i) *gen.At(i) = pattern(i, salt);
  } else {
    auto* p = static_cast<std::uint32_t*>(mine.ptr);
    for (std::size_t i = 0; i < count; ++i) p[i] = pattern(first + i, salt);
  }
  wm.comm().barrier(nullptr);

  if (wm.type() == memory_type::distributed) {
    auto* p = static_cast<std::uint32_t*>(mine.ptr);
    for (std::size_t i = 0; i < count; ++i)
      ASSERT_EQ(p[i], pattern(first + i, salt)) << "own element " << first + i;
    for (int r = 0; r < wm.num_parts(); ++r)
      if (r != wm.comm().rank()) {
        EXPECT_EQ(wm.part(r).ptr, nullptr) << "rank " << r << " mapped";
      }
    return;
  }
  // Continuous and chunked: every rank reads all of it, through PtrGen and through part().
  chunked_view view = wm.host_view();
  PtrGen<const chunked_view, std::uint32_t> gen(&view);
  for (std::size_t i = 0; i < elems; ++i)
    ASSERT_EQ(*gen.At(i), pattern(i, salt)) << "element " << i << " of " << elems;
  for (int r = 0; r < wm.num_parts(); ++r) {
    part_info p = wm.part(r);
    EXPECT_EQ(p.rank, r);
    EXPECT_EQ(p.device, -1);
    for (std::size_t k = 0; k < p.bytes / sizeof(std::uint32_t); ++k)
      ASSERT_EQ(static_cast<std::uint32_t*>(p.ptr)[k],
                pattern(p.offset / sizeof(std::uint32_t) + k, salt));
  }
}

class HostMemory : public ::testing::TestWithParam<std::tuple<mode, int, memory_type>> {};

}  // namespace

TEST_P(HostMemory, EveryRankSeesEveryPart) {
  auto [how, ranks, type] = GetParam();
  auto shm_before = list_dir("/dev/shm");
  run(how, ranks, [type = type](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    // Row of 3 uint32 (12 bytes, not a multiple of 16); a row count that does not divide.
    const std::size_t row = 12, rows = 100003;
    allocation_options opts;
    opts.granularity = row;
    auto wm = wholememory::allocation::create(comm, rows * row, type, memory_location::host, opts);
    EXPECT_EQ(wm.size(), rows * row);
    EXPECT_EQ(wm.type(), type);
    EXPECT_EQ(wm.location(), memory_location::host);
    ASSERT_EQ(wm.num_parts(), comm->size());
    for (int r = 0; r < wm.num_parts(); ++r) {
      part_info p = wm.part(r);
      if (r > 0) {
        EXPECT_EQ(p.offset % row, 0u) << "rank " << r << " starts mid-row";
      }
      EXPECT_EQ(p.offset, wm.get_partition().part_offset(r));
    }
    write_and_verify(wm, 0x5eed + comm->size());
    wm.free();
    EXPECT_FALSE(static_cast<bool>(wm));

    // Caller-given parts, one of them empty, the last one holding a partial row.
    std::vector<std::size_t> sizes(comm->size());
    for (int r = 0; r < comm->size(); ++r) sizes[r] = (r % 2 == 1) ? 0 : row * (1000 + 37 * r);
    sizes.back() += 4;
    std::size_t total = 0;
    for (auto s : sizes) total += s;
    opts.part_bytes = sizes;
    auto given = wholememory::allocation::create(comm, total, type, memory_location::host, opts);
    for (int r = 0; r < comm->size(); ++r) EXPECT_EQ(given.part(r).bytes, sizes[r]);
    write_and_verify(given, 77);

    // Zero bytes.
    auto empty = wholememory::allocation::create(comm, 0, type, memory_location::host);
    EXPECT_EQ(empty.size(), 0u);
    EXPECT_EQ(empty.local_part().bytes, 0u);
  });
  EXPECT_EQ(list_dir("/dev/shm"), shm_before) << "a segment was left in /dev/shm";
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, HostMemory,
    ::testing::Combine(::testing::Values(mode::processes, mode::threads),
                       ::testing::Values(1, 2, 3, 4),
                       ::testing::Values(memory_type::continuous, memory_type::chunked,
                                         memory_type::distributed)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == mode::processes ? "processes" : "threads") +
             std::to_string(std::get<1>(info.param)) + "_" +
             memory_type_name(std::get<2>(info.param));
    });

TEST(HostMemoryErrors, MismatchedSizesFailOnEveryRank) {
  run(mode::processes, 3, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    std::size_t bytes = bs->rank() == 2 ? 4096 : 8192;
    try {
      wholememory::allocation::create(comm, bytes, memory_type::chunked, memory_location::host);
      ADD_FAILURE() << "rank " << bs->rank() << " allocated despite mismatched sizes";
    } catch (const mismatch_error& e) {
      EXPECT_NE(std::string(e.what()).find("8192"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("4096"), std::string::npos) << e.what();
    }
    // The communicator is still usable afterwards.
    auto ok =
        wholememory::allocation::create(comm, 64, memory_type::chunked, memory_location::host);
    EXPECT_EQ(ok.size(), 64u);
  });
}

// More host memory than the host has is refused before any page is touched (it would end in
// the kernel's out-of-memory killer), on every rank, with an out_of_memory that leads with the
// allocation's name and says both sizes; the communicator stays usable.
TEST(HostMemoryErrors, MoreThanTheHostHasIsRefusedByName) {
  for (memory_type t : {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
    run(mode::threads, 2, [t](std::shared_ptr<bootstrap> bs) {
      auto comm = make_host_communicator(bs);
      allocation_options opts;
      opts.name = "the test's huge table";
      const std::size_t huge = std::size_t{1} << 50;  // 1 PiB
      try {
        wholememory::allocation::create(comm, huge, t, memory_location::host, opts);
        ADD_FAILURE() << "allocated 1 PiB of host memory";
      } catch (const wholememory::out_of_memory& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind("the test's huge table: 1048576.00 GiB", 0), 0u) << what;
        EXPECT_NE(what.find(memory_type_name(t)), std::string::npos) << what;
        EXPECT_NE(what.find("MiB of memory available"), std::string::npos) << what;
        EXPECT_NE(what.find("1073741824 MiB"), std::string::npos) << what;
      }
      auto ok = wholememory::allocation::create(comm, 4096, t, memory_location::host);
      EXPECT_EQ(ok.size(), 4096u);
    });
  }
}

TEST(HostMemoryErrors, MismatchedTypeOrLocationFailOnEveryRank) {
  run(mode::threads, 2, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    memory_type t = bs->rank() == 0 ? memory_type::continuous : memory_type::chunked;
    EXPECT_THROW(wholememory::allocation::create(comm, 1024, t, memory_location::host),
                 mismatch_error);
    allocation_options opts;
    opts.granularity = bs->rank() == 0 ? 8 : 16;
    EXPECT_THROW(wholememory::allocation::create(comm, 1024, memory_type::continuous,
                                                 memory_location::host, opts),
                 mismatch_error);
  });
}

TEST(HostMemoryErrors, OneRankWithBadArgumentsFailsEveryRank) {
  run(mode::processes, 2, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    allocation_options opts;
    // Rank 1's list does not sum to the total; rank 0's does.
    opts.part_bytes =
        bs->rank() == 0 ? std::vector<std::size_t>{512, 512} : std::vector<std::size_t>{512, 256};
    try {
      wholememory::allocation::create(comm, 1024, memory_type::continuous, memory_location::host,
                                      opts);
      ADD_FAILURE() << "rank " << bs->rank() << " allocated";
    } catch (const logic_error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("sum to 768"), std::string::npos) << msg;
    }
    // Part sizes that are not multiples of the granularity.
    opts.part_bytes = {500, 524};
    opts.granularity = 8;
    EXPECT_THROW(wholememory::allocation::create(comm, 1024, memory_type::chunked,
                                                 memory_location::host, opts),
                 logic_error);
  });
}

TEST(HostMemoryErrors, DeviceListNeedsOneRankAndDeviceMemory) {
  run(mode::threads, 2, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    allocation_options opts;
    opts.devices = {0, 1};
    EXPECT_THROW(wholememory::allocation::create(comm, 1024, memory_type::continuous,
                                                 memory_location::device, opts),
                 logic_error);
  });
  run(mode::threads, 1, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    allocation_options opts;
    opts.devices = {0, 1};
    EXPECT_THROW(wholememory::allocation::create(comm, 1024, memory_type::chunked,
                                                 memory_location::host, opts),
                 logic_error);
  });
}

TEST(HostMemoryErrors, AccessorsRejectWrongType) {
  run(mode::threads, 2, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    auto wm = wholememory::allocation::create(comm, 4096, memory_type::distributed,
                                              memory_location::host);
    EXPECT_THROW(wm.data(), logic_error);
    EXPECT_THROW(wm.host_view(), logic_error);
    EXPECT_THROW(wm.part(2), logic_error);
    EXPECT_THROW(wm.part(-1), logic_error);
  });
}

// A rank killed in the middle of a collective allocation makes the others fail within the
// timeout instead of hanging, and nothing is left in /dev/shm.
TEST(HostMemoryErrors, KilledRankMakesOthersTimeOut) {
  auto shm_before = list_dir("/dev/shm");
  auto start = std::chrono::steady_clock::now();
  auto result = fork_ranks(
      3,
      [](std::shared_ptr<bootstrap> bs) {
        auto comm = make_host_communicator(bs);
        if (bs->rank() == 1) ::raise(SIGKILL);
        EXPECT_THROW(wholememory::allocation::create(comm, 1 << 20, memory_type::continuous,
                                                     memory_location::host),
                     timeout_error);
      },
      std::chrono::seconds(3));
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(result.status[0], 0);
  EXPECT_EQ(result.status[1], 128 + SIGKILL);
  EXPECT_EQ(result.status[2], 0);
  EXPECT_LT(seconds, 15.0);
  EXPECT_EQ(list_dir("/dev/shm"), shm_before);
}

// A peer dies (SIGKILL) or stops (SIGSTOP) while the others are in collectives and own
// allocations.  The survivors see the collective's error (which one, which rank) and unwind:
// the allocations' destructors must not crash, must not wait in a barrier that cannot
// complete, and must not print a second error over the first; all within about one timeout,
// leaving nothing in /dev/shm.
void peer_fault_case(int signal_number) {
  const auto timeout = std::chrono::seconds(2);
  const std::string logs = "/tmp/wholememory_peer_fault_" + std::to_string(::getpid());
  auto shm_before = list_dir("/dev/shm");
  auto result = fork_ranks(
      3,
      [&](std::shared_ptr<bootstrap> bs) {
        // This rank's stderr, to check what the destructors printed.
        const std::string log = logs + "." + std::to_string(bs->rank());
        std::FILE* err = std::freopen(log.c_str(), "w", stderr);
        ASSERT_NE(err, nullptr);
        std::vector<std::int64_t> pids(3);
        const std::int64_t me = ::getpid();
        bs->allgather(&me, pids.data(), sizeof(me));
        // The clock starts once the allocations exist: with a GPU present, creating them
        // initializes CUDA (host registration), which is no part of noticing the fault.
        auto start = std::chrono::steady_clock::now();
        std::string error;
        try {
          auto comm = make_host_communicator(bs);
          auto a = wholememory::allocation::create(comm, 1 << 20, memory_type::continuous,
                                                   memory_location::host);
          auto b = wholememory::allocation::create(comm, 1 << 20, memory_type::chunked,
                                                   memory_location::host);
          auto c = wholememory::allocation::create(comm, 1 << 20, memory_type::distributed,
                                                   memory_location::host);
          std::int64_t x = 1;
          start = std::chrono::steady_clock::now();
          for (int i = 0; i < 1000; ++i) {
            if (bs->rank() == 1 && i == 5) {
              if (signal_number == SIGSTOP && ::fork() == 0) {
                // A watchdog: a stopped peer never exits by itself, whatever the others do.
                // It leaves as soon as its parent is gone (then it has a new parent).
                for (int tick = 0; tick < 100 && ::getppid() == me; ++tick) ::usleep(100000);
                if (::getppid() == me) ::kill(static_cast<pid_t>(me), SIGKILL);
                ::_exit(0);
              }
              ::raise(signal_number);
            }
            comm->allreduce_sum(&x, &x, 1, dtype::int64, nullptr);
          }
        } catch (const timeout_error& e) {
          error = e.what();
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // One timeout to notice a stopped peer (a dead one is noticed at once).
        EXPECT_LT(seconds, 2.0 + 1.0) << "the survivors waited for more than one timeout";
        if (bs->rank() == 0 && signal_number == SIGSTOP) {
          ::kill(static_cast<pid_t>(pids[1]), SIGKILL);
        }
        std::fflush(stderr);
        std::ifstream in(log);
        const std::string printed((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
        EXPECT_NE(error.find("allreduce"), std::string::npos) << error;
        // The dead or stopped rank by number and pid, also where another rank noticed first.
        EXPECT_NE(error.find("1 (pid " + std::to_string(pids[1]) + ")"), std::string::npos)
            << error;
        EXPECT_EQ(printed, "") << "a destructor printed";
        std::remove(log.c_str());
      },
      timeout);
  EXPECT_EQ(result.status[0], 0);
  EXPECT_EQ(result.status[1], 128 + (signal_number == SIGSTOP ? SIGKILL : signal_number));
  EXPECT_EQ(result.status[2], 0);
  EXPECT_EQ(list_dir("/dev/shm"), shm_before);
}

TEST(PeerFaults, KilledPeerLeavesTheFirstErrorAndNoCrash) { peer_fault_case(SIGKILL); }

TEST(PeerFaults, StoppedPeerLeavesTheFirstErrorWithinOneTimeout) { peer_fault_case(SIGSTOP); }

// Creating and freeing leaves no descriptor open and no mapping behind.
TEST(HostMemoryErrors, NoDescriptorLeaks) {
  auto body = [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    for (memory_type t :
         {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
      auto wm = wholememory::allocation::create(comm, 3 << 20, t, memory_location::host);
      write_and_verify(wm, 9);
    }
  };
  // A first round lets the CUDA driver, when a GPU is present, open the descriptors it keeps
  // for the life of the process (host registration initializes it).
  run(mode::threads, 3, body);
  auto fds_before = list_dir("/proc/self/fd");
  run(mode::threads, 3, body);
  EXPECT_EQ(list_dir("/proc/self/fd"), fds_before);
}

// CPU ranks (device -1) use no GPU: nothing is shared, whatever the rank count, and the report
// is the same on every rank.
TEST(GpuSharing, CpuRanksShareNothing) {
  for (int ranks : {1, 3}) {
    run(mode::processes, ranks, [](std::shared_ptr<wholememory::bootstrap> bs) {
      const wholememory::gpu_sharing s = wholememory::describe_gpu_sharing(*bs, -1);
      EXPECT_EQ(s.ranks, bs->size());
      EXPECT_EQ(s.gpus, 0);
      EXPECT_EQ(s.max_ranks_per_gpu, 0);
      EXPECT_FALSE(s.shared());
      EXPECT_TRUE(s.description.empty());
    });
  }
}

// The environment report lists exactly the visible devices, each with a name, memory and a
// compute capability, and has the runtime and NCCL versions exactly when CUDA is built in (a
// host-only build reports nothing; a CUDA build on a machine without a GPU reports the libraries
// and says why no device is listed).
TEST(CudaEnvironment, ListsTheVisibleDevices) {
  const wholememory::cuda_environment env = wholememory::describe_cuda_environment();
  ASSERT_EQ(static_cast<int>(env.gpus.size()), wholememory::device_count());
  for (std::size_t i = 0; i < env.gpus.size(); ++i) {
    EXPECT_EQ(env.gpus[i].device, static_cast<int>(i));
    EXPECT_FALSE(env.gpus[i].name.empty());
    EXPECT_GT(env.gpus[i].memory_bytes, 0u);
    EXPECT_GT(env.gpus[i].compute_major, 0);
    EXPECT_FALSE(env.gpus[i].pci_bus_id.empty());
  }
#if defined(WHOLESTORE_HAS_CUDA)
  EXPECT_TRUE(env.cuda_built);
  EXPECT_GT(env.runtime_version, 0);
  EXPECT_GT(env.nccl_version, 0);
  if (env.gpus.empty()) {
    EXPECT_FALSE(env.note.empty());
  } else {
    EXPECT_GT(env.driver_version, 0);
  }
#else
  EXPECT_FALSE(env.cuda_built);
  EXPECT_EQ(env.driver_version, 0);
  EXPECT_EQ(env.runtime_version, 0);
  EXPECT_EQ(env.nccl_version, 0);
  EXPECT_TRUE(env.note.empty());
#endif
}
