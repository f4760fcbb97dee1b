// umemCuda on a GPU: every universal call, copies between CUDA and the host, a file, host and
// device WholeMemory and another CUDA context at the edges (0 bytes, 1 byte, unaligned), mirrors,
// status for bad input, and a copy of more than 4 GiB.  Bodies run in a forked child (see
// gpu_test_util.hpp); device bytes are checked by copying them back through umem into host
// memory, which the host-context tests (umem_test.cpp) have checked on their own.
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <wholememory/umem.h>

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace wholememory;
using bytes_t = std::vector<unsigned char>;
using wholestore_test::fork_ranks;

namespace {

bytes_t random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  bytes_t out(n);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

std::uintptr_t address_of(const bytes_t& b) { return reinterpret_cast<std::uintptr_t>(b.data()); }

#define EXPECT_UMEM_OK(ctx) EXPECT_TRUE(umem_is_ok(ctx)) << umem_get_message(ctx)

void run_forked(const std::function<void(std::shared_ptr<bootstrap>)>& body) {
  auto result = fork_ranks(1, body);
  EXPECT_TRUE(result.all_ok()) << "the forked test body failed (status " << result.status[0] << ")";
}

// Copies `pattern` from host into `ctx` at `adr` + offsets and back, at the edges.
void round_trips(void* ctx, std::uintptr_t adr, std::size_t span) {
  umemHost host;
  umemHost_ctor(&host);
  const bytes_t pattern = random_bytes(span, 21);
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4099}, span - 3}) {
    for (std::size_t off : {std::size_t{0}, std::size_t{3}}) {
      SCOPED_TRACE(std::to_string(bytes) + " bytes at offset " + std::to_string(off));
      bytes_t back(span, 0xee);
      umem_set(ctx, adr, 0, span);
      umem_copy_to(&host, address_of(pattern), ctx, adr + off, bytes);
      umem_copy_from(&host, address_of(back), ctx, adr, span);
      EXPECT_UMEM_OK(ctx);
      bytes_t want(span, 0);
      std::memcpy(want.data() + off, pattern.data(), bytes);
      EXPECT_EQ(back, want);
    }
  }
  umem_dtor(&host);
}

TEST(UmemCudaGpu, EveryMethod) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_forked([](std::shared_ptr<bootstrap>) {
    umemCuda cuda, same;
    umemCuda_ctor(&cuda, 0);
    umemCuda_ctor(&same, 0);
    ASSERT_TRUE(umem_is_ok(&cuda)) << umem_get_message(&cuda);
    EXPECT_STREQ(umem_get_device_name(&cuda), "CUDA");
    EXPECT_TRUE(umem_is_same_device(&cuda, &same));
    EXPECT_EQ(umem_fundamental_align(&cuda), 256u);

    const std::size_t span = 8192;
    std::uintptr_t a = umem_alloc(&cuda, span);
    std::uintptr_t z = umem_calloc(&cuda, 1000, 3);
    ASSERT_TRUE(umem_is_ok(&cuda)) << umem_get_message(&cuda);
    umemHost host;
    umemHost_ctor(&host);
    bytes_t back(3000, 0xee);
    umem_copy_to(&cuda, z, &host, address_of(back), 3000);
    EXPECT_EQ(back, bytes_t(3000, 0));
    round_trips(&cuda, a, span);

    // cuda -> cuda (same device), unaligned
    const bytes_t pattern = random_bytes(span, 4);
    std::uintptr_t b = umem_alloc(&same, span);
    umem_copy_to(&host, address_of(pattern), &cuda, a, span);
    umem_copy_to(&cuda, a + 1, &same, b + 5, 4000);
    bytes_t got(4000);
    umem_copy_to(&same, b + 5, &host, address_of(got), 4000);
    EXPECT_EQ(0, std::memcmp(got.data(), pattern.data() + 1, 4000));

    // aligned, connect to the same device, mirrors from host
    std::uintptr_t aligned = umem_aligned_alloc(&cuda, 1024, 2048);
    EXPECT_EQ(aligned % 1024, 0u);
    EXPECT_LE(umem_aligned_origin(&cuda, aligned), aligned);
    umem_free_aligned(&cuda, aligned);
    EXPECT_EQ(umem_connect(&cuda, a, span, &same, 0), a);
    std::uintptr_t mirror = umem_connect(&host, address_of(pattern), span, &cuda, 256);
    EXPECT_UMEM_OK(&cuda);
    EXPECT_EQ(mirror % 256, 0u);
    umem_set(&cuda, mirror, 0x11, 10);
    bytes_t pulled = pattern;
    umem_sync_from(&host, address_of(pulled), &cuda, mirror, 10);
    EXPECT_EQ(pulled[9], 0x11);
    EXPECT_EQ(pulled[10], pattern[10]);
    umem_disconnect(&host, address_of(pattern), &cuda, mirror, 256);
    EXPECT_UMEM_OK(&cuda);

    // bad input
    umem_free(&cuda, a);
    umem_free(&cuda, a);
    EXPECT_EQ(umem_get_status(&cuda), umemValueError);
    umem_clean_status(&cuda);
    umem_copy_to(&host, address_of(pattern), &cuda, 0, 4);
    EXPECT_EQ(umem_get_status(&cuda), umemValueError);
    umem_clean_status(&cuda);
    umem_alloc(&cuda, SIZE_MAX / 2);
    EXPECT_EQ(umem_get_status(&cuda), umemMemoryError) << umem_get_message(&cuda);
    umem_clean_status(&cuda);
    umemCuda beyond;
    umemCuda_ctor(&beyond, device_count());
    EXPECT_EQ(umem_get_status(&beyond), umemValueError);
    EXPECT_NE(std::strstr(umem_get_message(&beyond), "out of range"), nullptr);
    umem_dtor(&beyond);

    umem_dtor(&host);
    umem_dtor(&same);
    umem_dtor(&cuda);
  });
}

TEST(UmemCudaGpu, PairsWithFileAndWholeMemory) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_forked([](std::shared_ptr<bootstrap> bs) {
    umemCuda cuda;
    umemCuda_ctor(&cuda, 0);
    ASSERT_TRUE(umem_is_ok(&cuda)) << umem_get_message(&cuda);
    auto comm = make_host_communicator(bs);
    const std::size_t span = (std::size_t{9} << 20) + 7;  // more than the staging buffer
    const bytes_t pattern = random_bytes(span, 8);
    umemHost host;
    umemHost_ctor(&host);
    std::uintptr_t dev = umem_alloc(&cuda, span);
    umem_copy_to(&host, address_of(pattern), &cuda, dev, span);

    // file <-> cuda, staged both ways
    std::string path = "/tmp/umem_gpu_test_" + std::to_string(::getpid()) + ".bin";
    umemFile file;
    umemFile_ctor(&file, path.c_str(), "w+");
    umem_copy_to(&cuda, dev + 1, &file, 0, span - 1);
    std::uintptr_t dev2 = umem_alloc(&cuda, span);
    umem_copy_from(&cuda, dev2, &file, 0, span - 1);
    EXPECT_UMEM_OK(&file);
    bytes_t back(span);
    umem_copy_to(&cuda, dev2, &host, address_of(back), span - 1);
    EXPECT_EQ(0, std::memcmp(back.data(), pattern.data() + 1, span - 1));

    // WholeMemory on the device and on the host <-> cuda and file
    for (memory_location loc : {memory_location::device, memory_location::host}) {
      for (memory_type type : {memory_type::continuous, memory_type::chunked}) {
        SCOPED_TRACE(std::string(memory_type_name(type)) + " " + memory_location_name(loc));
        auto wm = wholememory::allocation::create(comm, span + 100, type, loc);
        umemWholeMemory wmc;
        umemWholeMemory_ctor(&wmc, &wm);
        umem_copy_to(&cuda, dev, &wmc, 3, span);
        umem_copy_to(&wmc, 3, &file, 0, span);
        umem_set(&wmc, 0, 0, span + 100);
        umem_copy_from(&wmc, 3, &file, 0, span);
        bytes_t out(span);
        umem_copy_to(&wmc, 3, &host, address_of(out), span);
        EXPECT_UMEM_OK(&wmc);
        EXPECT_EQ(out, pattern);
        umem_dtor(&wmc);
        wm.free();
      }
    }
    umem_dtor(&file);
    ::unlink(path.c_str());
    umem_dtor(&host);
    umem_dtor(&cuda);
  });
}

// More than 4 GiB in one call each way (32-bit size or offset arithmetic would break here).
TEST(UmemCudaGpu, CopiesOfMoreThanFourGiB) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_forked([](std::shared_ptr<bootstrap>) {
    umemCuda cuda;
    umemCuda_ctor(&cuda, 0);
    ASSERT_TRUE(umem_is_ok(&cuda)) << umem_get_message(&cuda);
    const std::size_t big = (std::size_t{4} << 30) + 4097;
    std::uintptr_t dev = umem_alloc(&cuda, big);
    if (!umem_is_ok(&cuda)) {
      GTEST_SKIP() << "cannot allocate " << big << " bytes: " << umem_get_message(&cuda);
    }
    umemHost host;
    umemHost_ctor(&host);
    bytes_t data(big);
    for (std::size_t i = 0; i < big; i += 4093) data[i] = static_cast<unsigned char>(i / 4093);
    data[big - 1] = 0x99;
    umem_copy_to(&host, address_of(data), &cuda, dev, big);
    umem_set(&cuda, dev + (std::size_t{4} << 30), 0x5a, 2);  // bytes past 4 GiB
    bytes_t back(big, 0);
    umem_copy_from(&host, address_of(back), &cuda, dev, big);
    EXPECT_UMEM_OK(&cuda);
    data[std::size_t{4} << 30] = 0x5a;
    data[(std::size_t{4} << 30) + 1] = 0x5a;
    EXPECT_TRUE(back == data);
    umem_dtor(&host);
    umem_dtor(&cuda);
  });
}

}  // namespace
