// umem.h from C++: copies across every pair of the contexts available without a GPU (host,
// file, WholeMemory of each type on host memory), mirrors, every universal call per context,
// WholeMemory over several ranks, and the status of umemCuda where no GPU is usable.  Each
// region is checked through a reference path that bypasses umem (memcpy, pread/pwrite, the
// WholeMemory part pointers).
#include "common/multiprocess.hpp"

#include <wholememory/umem.h>

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

using namespace wholememory;
using bytes_t = std::vector<unsigned char>;

namespace {

enum class kind { host, file, wm_continuous, wm_chunked, wm_distributed };
const kind all_kinds[] = {kind::host, kind::file, kind::wm_continuous, kind::wm_chunked,
                          kind::wm_distributed};

const char* kind_name(kind k) {
  switch (k) {
    case kind::host:
      return "host";
    case kind::file:
      return "file";
    case kind::wm_continuous:
      return "wm_continuous";
    case kind::wm_chunked:
      return "wm_chunked";
    case kind::wm_distributed:
      return "wm_distributed";
  }
  return "?";
}

std::shared_ptr<communicator> one_rank() {
  return make_host_communicator(
      std::shared_ptr<bootstrap>(std::move(make_thread_bootstraps(1)[0])));
}

std::string temp_dir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/umem_test_XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    return std::string(d == nullptr ? "/tmp" : d);
  }();
  return dir;
}

std::string fresh_path() {
  static int counter = 0;
  return temp_dir() + "/f" + std::to_string(counter++) + ".bin";
}

bytes_t random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  bytes_t out(n);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

// A context of one kind holding a region of `bytes` bytes made by umem_alloc, with reference
// access to the region that does not go through umem.
class region {
 public:
  region(kind k, std::size_t bytes) : kind_(k), bytes_(bytes) {
    switch (k) {
      case kind::host:
        umemHost_ctor(&host_);
        ctx_ = &host_;
        break;
      case kind::file:
        path_ = fresh_path();
        umemFile_ctor(&file_, path_.c_str(), "w+b");
        ctx_ = &file_;
        fd_ = ::open(path_.c_str(), O_RDWR);
        break;
      default: {
        memory_type type = k == kind::wm_continuous ? memory_type::continuous
                           : k == kind::wm_chunked  ? memory_type::chunked
                                                    : memory_type::distributed;
        wm_ =
            wholememory::allocation::create(one_rank(), bytes + 4096, type, memory_location::host);
        umemWholeMemory_ctor(&wmc_, &wm_);
        ctx_ = &wmc_;
      }
    }
    EXPECT_TRUE(umem_is_ok(ctx_)) << umem_get_message(ctx_);
    adr = umem_alloc(ctx_, bytes);
    EXPECT_TRUE(umem_is_ok(ctx_)) << umem_get_message(ctx_);
  }
  ~region() {
    umem_dtor(ctx_);
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  region(const region&) = delete;
  region& operator=(const region&) = delete;

  void* ctx() { return ctx_; }
  std::size_t size() const { return bytes_; }

  void poke(std::uintptr_t at, const bytes_t& data) {
    if (kind_ == kind::file) {
      ASSERT_EQ(::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(at)),
                static_cast<ssize_t>(data.size()));
    } else {
      std::memcpy(pointer(at), data.data(), data.size());
    }
  }
  bytes_t peek(std::uintptr_t at, std::size_t n) {
    bytes_t out(n);
    if (kind_ == kind::file) {
      EXPECT_EQ(::pread(fd_, out.data(), n, static_cast<off_t>(at)), static_cast<ssize_t>(n));
    } else {
      std::memcpy(out.data(), pointer(at), n);
    }
    return out;
  }

  std::uintptr_t adr = 0;

 private:
  void* pointer(std::uintptr_t at) {
    if (kind_ == kind::host) return reinterpret_cast<void*>(at);
    return static_cast<char*>(wm_.part(0).ptr) + at;  // one rank: one part
  }

  kind kind_;
  std::size_t bytes_;
  std::string path_;
  int fd_ = -1;
  umemHost host_{};
  umemFile file_{};
  umemWholeMemory wmc_{};
  wholememory::allocation wm_;
  void* ctx_ = nullptr;
};

using pair_param = std::tuple<kind, kind>;

std::string pair_name(const ::testing::TestParamInfo<pair_param>& info) {
  return std::string(kind_name(std::get<0>(info.param))) + "_to_" +
         kind_name(std::get<1>(info.param));
}

class UmemPair : public ::testing::TestWithParam<pair_param> {};

// 0 bytes, 1 byte and an odd size, at aligned and unaligned offsets, both call forms; the
// bytes around the destination range stay as they were.
TEST_P(UmemPair, CopiesAtTheEdges) {
  auto [src_kind, dst_kind] = GetParam();
  constexpr std::size_t span = 8192;
  region src(src_kind, span), dst(dst_kind, span);
  const bytes_t pattern = random_bytes(span, 11);
  const bytes_t sentinel(span, 0xee);
  src.poke(src.adr, pattern);
  struct edge {
    std::size_t bytes, src_off, dst_off;
  };
  for (edge e : {edge{0, 0, 0}, edge{1, 0, 0}, edge{1, 4095, 17}, edge{4099, 1, 3},
                 edge{4099, 7, 0}, edge{span, 0, 0}}) {
    for (bool copy_from : {false, true}) {
      SCOPED_TRACE(std::to_string(e.bytes) + " bytes, offsets " + std::to_string(e.src_off) +
                   " -> " + std::to_string(e.dst_off) + (copy_from ? ", copy_from" : ""));
      dst.poke(dst.adr, sentinel);
      if (copy_from) {
        umem_copy_from(dst.ctx(), dst.adr + e.dst_off, src.ctx(), src.adr + e.src_off, e.bytes);
      } else {
        umem_copy_to(src.ctx(), src.adr + e.src_off, dst.ctx(), dst.adr + e.dst_off, e.bytes);
      }
      ASSERT_TRUE(umem_is_ok(src.ctx())) << umem_get_message(src.ctx());
      ASSERT_TRUE(umem_is_ok(dst.ctx())) << umem_get_message(dst.ctx());
      bytes_t want = sentinel;
      std::memcpy(want.data() + e.dst_off, pattern.data() + e.src_off, e.bytes);
      ASSERT_EQ(dst.peek(dst.adr, span), want);
    }
  }
  // Sizes checked by the _safe forms, on the side whose size is exceeded.
  umem_copy_to_safe(src.ctx(), src.adr, 10, dst.ctx(), dst.adr, 100, 11);
  EXPECT_EQ(umem_get_status(src.ctx()), umemIndexError);
  EXPECT_TRUE(umem_is_ok(dst.ctx()));
  umem_clean_status(src.ctx());
  umem_copy_from_safe(dst.ctx(), dst.adr, 10, src.ctx(), src.adr, 100, 11);
  EXPECT_EQ(umem_get_status(dst.ctx()), umemIndexError);
  EXPECT_TRUE(umem_is_ok(src.ctx()));
  umem_clean_status(dst.ctx());
  // A context in error blocks the copy.
  umem_set_status(dst.ctx(), umemRuntimeError, "blocked");
  dst.poke(dst.adr, sentinel);
  umem_copy_to(src.ctx(), src.adr, dst.ctx(), dst.adr, 16);
  EXPECT_EQ(dst.peek(dst.adr, 16), bytes_t(16, 0xee));
  EXPECT_STREQ(umem_get_message(dst.ctx()), "blocked");
  EXPECT_TRUE(umem_is_ok(src.ctx()));
}

// A mirror of a source region in the other context: connect copies, sync_to pushes,
// sync_from pulls back, disconnect frees (a second disconnect is an error on the mirror's side).
TEST_P(UmemPair, MirrorsConnectSyncDisconnect) {
  auto [src_kind, dst_kind] = GetParam();
  constexpr std::size_t span = 3001;
  region src(src_kind, span), dst(dst_kind, 16);
  bytes_t pattern = random_bytes(span, 5);
  src.poke(src.adr, pattern);
  for (std::size_t alignment : {std::size_t{0}, std::size_t{64}}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    std::uintptr_t mirror = umem_connect(src.ctx(), src.adr, span, dst.ctx(), alignment);
    ASSERT_TRUE(umem_is_ok(dst.ctx())) << umem_get_message(dst.ctx());
    if (src_kind == kind::host && dst_kind == kind::host) {
      // Two host contexts are the same memory: no mirror unless the alignment asks for one.
      EXPECT_TRUE(umem_is_same_device(src.ctx(), dst.ctx()));
      if (alignment == 0 || src.adr % alignment == 0) {
        EXPECT_EQ(mirror, src.adr);
        umem_disconnect(src.ctx(), src.adr, dst.ctx(), mirror, alignment);
        EXPECT_TRUE(umem_is_ok(dst.ctx()));
        continue;
      }
    } else {
      EXPECT_FALSE(umem_is_same_device(src.ctx(), dst.ctx()));
    }
    if (alignment != 0) {
      EXPECT_EQ(mirror % alignment, 0u);
    }
    // read the mirror back through umem into a host buffer
    umemHost host;
    umemHost_ctor(&host);
    bytes_t got(span);
    auto got_adr = reinterpret_cast<std::uintptr_t>(got.data());
    umem_copy_to(dst.ctx(), mirror, &host, got_adr, span);
    ASSERT_TRUE(umem_is_ok(dst.ctx())) << umem_get_message(dst.ctx());
    EXPECT_EQ(got, pattern);

    pattern[100] ^= 0x5a;
    src.poke(src.adr + 100, bytes_t{pattern[100]});
    umem_sync_to(src.ctx(), src.adr + 100, dst.ctx(), mirror + 100, 1);
    umem_copy_to(dst.ctx(), mirror, &host, got_adr, span);
    EXPECT_EQ(got, pattern);

    umem_set(dst.ctx(), mirror + 7, 0x42, 5);
    umem_sync_from(src.ctx(), src.adr + 7, dst.ctx(), mirror + 7, 5);
    EXPECT_EQ(src.peek(src.adr + 7, 5), bytes_t(5, 0x42));
    std::memset(pattern.data() + 7, 0x42, 5);

    umem_sync_from_safe(src.ctx(), src.adr, 4, dst.ctx(), mirror, span, 5);
    EXPECT_EQ(umem_get_status(src.ctx()), umemIndexError);
    umem_clean_status(src.ctx());
    umem_sync_to_safe(src.ctx(), src.adr, span, dst.ctx(), mirror, span, span);
    EXPECT_TRUE(umem_is_ok(src.ctx()) && umem_is_ok(dst.ctx()));

    umem_disconnect(src.ctx(), src.adr, dst.ctx(), mirror, alignment);
    EXPECT_TRUE(umem_is_ok(dst.ctx())) << umem_get_message(dst.ctx());
    umem_disconnect(src.ctx(), src.adr, dst.ctx(), mirror, alignment);
    EXPECT_EQ(umem_get_status(dst.ctx()), umemValueError);
    EXPECT_NE(std::strstr(umem_get_message(dst.ctx()), "umem_disconnect"), nullptr);
    umem_clean_status(dst.ctx());
    umem_dtor(&host);
  }
}

INSTANTIATE_TEST_SUITE_P(AllPairs, UmemPair,
                         ::testing::Combine(::testing::ValuesIn(all_kinds),
                                            ::testing::ValuesIn(all_kinds)),
                         pair_name);

class UmemContext : public ::testing::TestWithParam<kind> {};

// Every universal call on one context of the kind.
TEST_P(UmemContext, EveryMethod) {
  region r(GetParam(), 1000);
  void* c = r.ctx();
  EXPECT_STRNE(umem_get_device_name(c), "Virtual");

  std::uintptr_t a = umem_alloc(c, 100);
  std::uintptr_t z = umem_calloc(c, 10, 7);
  ASSERT_TRUE(umem_is_ok(c)) << umem_get_message(c);
  EXPECT_NE(a, z);
  EXPECT_EQ(r.peek(z, 70), bytes_t(70, 0));
  std::uintptr_t empty = umem_alloc(c, 0);
  EXPECT_NE(empty, a);
  umem_free(c, empty);

  umem_set(c, a, 0x3c, 100);
  umem_set(c, a + 1, 0x01, 1);
  umem_set_safe(c, a + 2, 98, 0x02, 0);
  bytes_t want(100, 0x3c);
  want[1] = 0x01;
  EXPECT_EQ(r.peek(a, 100), want);
  umem_set_safe(c, a, 99, 0, 100);
  EXPECT_EQ(umem_get_status(c), umemIndexError);
  EXPECT_NE(std::strstr(umem_get_message(c), "umem_set_safe"), nullptr);
  umem_clean_status(c);

  std::uintptr_t aligned = umem_aligned_alloc(c, 128, 256);
  ASSERT_TRUE(umem_is_ok(c)) << umem_get_message(c);
  EXPECT_EQ(aligned % 128, 0u);
  std::uintptr_t origin = umem_aligned_origin(c, aligned);
  EXPECT_LE(origin, aligned);
  EXPECT_LT(aligned - origin, 128u);
  EXPECT_GE(umem_fundamental_align(c), 1u);
  umem_free_aligned(c, aligned);
  EXPECT_TRUE(umem_is_ok(c));
  umem_aligned_origin(c, aligned);
  EXPECT_EQ(umem_get_status(c), umemValueError);
  umem_clean_status(c);

  // connect to itself: the same address, nothing copied or freed
  EXPECT_EQ(umem_connect(c, a, 100, c, 0), a);
  umem_sync_to(c, a, c, a, 100);
  umem_sync_from(c, a, c, a, 100);
  umem_disconnect(c, a, c, a, 0);
  EXPECT_EQ(r.peek(a, 100), want);
  // connect to itself with an alignment the address misses: a copy in the same context
  std::uintptr_t copy = umem_connect(c, a + 1, 10, c, 256);
  ASSERT_TRUE(umem_is_ok(c)) << umem_get_message(c);
  EXPECT_EQ(copy % 256, 0u);
  EXPECT_EQ(r.peek(copy, 10), bytes_t(want.begin() + 1, want.begin() + 11));
  umem_disconnect(c, a + 1, c, copy, 256);
  EXPECT_TRUE(umem_is_ok(c)) << umem_get_message(c);
  EXPECT_TRUE(umem_is_same_device(c, c));

  // freed and foreign addresses; a context in error does nothing until cleaned
  umem_free(c, a);
  EXPECT_TRUE(umem_is_ok(c));
  umem_free(c, a);
  EXPECT_EQ(umem_get_status(c), umemValueError);
  EXPECT_NE(std::strstr(umem_get_message(c), "already freed"), nullptr);
  EXPECT_EQ(umem_alloc(c, 8), 0u);
  umem_set(c, z, 0x77, 1);
  EXPECT_EQ(r.peek(z, 1), bytes_t{0});
  umem_clean_status(c);
  umem_free(c, z + 1);
  EXPECT_EQ(umem_get_status(c), umemValueError);
  umem_clean_status(c);
  // size overflow
  umem_set(c, z, 0, SIZE_MAX);
  EXPECT_NE(umem_get_status(c), umemOK);
  umem_clean_status(c);
  umem_calloc(c, SIZE_MAX / 2, 3);
  EXPECT_EQ(umem_get_status(c), umemValueError);
  umem_clean_status(c);
  umem_free(c, z);
  EXPECT_TRUE(umem_is_ok(c)) << umem_get_message(c);
}

INSTANTIATE_TEST_SUITE_P(AllKinds, UmemContext, ::testing::ValuesIn(all_kinds),
                         [](const auto& info) { return std::string(kind_name(info.param)); });

// Copies larger than the 8 MiB staging buffer, where neither side is plain host memory.
TEST(UmemStaging, LargeCopiesThroughFilesAndWholeMemory) {
  constexpr std::size_t big = (std::size_t{9} << 20) + 5;
  region file_a(kind::file, big), file_b(kind::file, big), wm(kind::wm_chunked, big);
  bytes_t pattern = random_bytes(big, 3);
  file_a.poke(file_a.adr, pattern);
  umem_copy_to(file_a.ctx(), file_a.adr, file_b.ctx(), file_b.adr, big);
  umem_copy_to(file_b.ctx(), file_b.adr, wm.ctx(), wm.adr, big);
  umem_set(file_a.ctx(), file_a.adr, 0, big);
  umem_copy_from(file_a.ctx(), file_a.adr + 1, wm.ctx(), wm.adr, big - 1);
  for (region* r : {&file_a, &file_b, &wm}) ASSERT_TRUE(umem_is_ok(r->ctx()));
  EXPECT_EQ(file_b.peek(file_b.adr, big), pattern);
  EXPECT_EQ(wm.peek(wm.adr, big), pattern);
  bytes_t shifted(big, 0);
  std::memcpy(shifted.data() + 1, pattern.data(), big - 1);
  EXPECT_EQ(file_a.peek(file_a.adr, big), shifted);
}

// WholeMemory over three ranks (threads): one call copies a host buffer over every part of
// continuous and chunked memory; distributed memory takes only this rank's part.
TEST(UmemWholeMemory, CopiesSpanThePartsOfThreeRanks) {
  for (memory_type type :
       {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
    SCOPED_TRACE(memory_type_name(type));
    wholestore_test::thread_ranks(3, [type](std::shared_ptr<bootstrap> bs) {
      auto comm = make_host_communicator(bs);
      const std::size_t total = 3 * 1000 + 5;
      auto wm = wholememory::allocation::create(comm, total, type, memory_location::host);
      umemWholeMemory ctx;
      umemWholeMemory_ctor(&ctx, &wm);
      umemHost host;
      umemHost_ctor(&host);
      const bytes_t pattern = random_bytes(total, 9);
      bytes_t back(total, 0);
      auto src = reinterpret_cast<std::uintptr_t>(pattern.data());
      auto dst = reinterpret_cast<std::uintptr_t>(back.data());
      part_info mine = wm.local_part();
      if (type == memory_type::distributed) {
        umem_copy_to(&host, src + mine.offset, &ctx, mine.offset, mine.bytes);
        umem_copy_to(&ctx, mine.offset, &host, dst + mine.offset, mine.bytes);
        EXPECT_TRUE(umem_is_ok(&ctx)) << umem_get_message(&ctx);
        EXPECT_EQ(0,
                  std::memcmp(back.data() + mine.offset, pattern.data() + mine.offset, mine.bytes));
        // One byte more reaches into a part this rank does not map.
        std::uintptr_t from = comm->rank() == 2 ? mine.offset - 1 : mine.offset;
        umem_copy_to(&host, src, &ctx, from, mine.bytes + 1);
        EXPECT_EQ(umem_get_status(&ctx), umemValueError);
        EXPECT_NE(std::strstr(umem_get_message(&ctx), "part of distributed memory"), nullptr)
            << umem_get_message(&ctx);
      } else {
        if (comm->rank() == 0) umem_copy_to(&host, src, &ctx, 0, total);
        EXPECT_TRUE(umem_is_ok(&ctx)) << umem_get_message(&ctx);
        comm->barrier(nullptr);
        umem_copy_to(&ctx, 1, &host, dst + 1, total - 1);
        EXPECT_TRUE(umem_is_ok(&ctx)) << umem_get_message(&ctx);
        EXPECT_EQ(0, std::memcmp(back.data() + 1, pattern.data() + 1, total - 1));
        comm->barrier(nullptr);
      }
      umem_dtor(&host);
      umem_dtor(&ctx);
      wm.free();
    });
  }
}

TEST(UmemWholeMemory, BadInput) {
  umemWholeMemory ctx;
  umemWholeMemory_ctor(&ctx, nullptr);
  EXPECT_EQ(umem_get_status(&ctx), umemValueError);
  EXPECT_NE(std::strstr(umem_get_message(&ctx), "umemWholeMemory_ctor"), nullptr);
  umem_dtor(&ctx);
  wholememory::allocation empty;
  umemWholeMemory_ctor(&ctx, &empty);
  EXPECT_EQ(umem_get_status(&ctx), umemValueError);
  umem_dtor(&ctx);

  auto wm = wholememory::allocation::create(one_rank(), 100, memory_type::continuous,
                                            memory_location::host);
  umemWholeMemory_ctor(&ctx, &wm);
  umemWholeMemory other;
  umemWholeMemory_ctor(&other, &wm);
  EXPECT_TRUE(umem_is_same_device(&ctx, &other));
  EXPECT_STREQ(umem_get_device_name(&ctx), "WholeMemory");
  umem_set(&ctx, 90, 0, 11);
  EXPECT_EQ(umem_get_status(&ctx), umemIndexError);
  EXPECT_NE(std::strstr(umem_get_message(&ctx), "outside the WholeMemory of 100 bytes"), nullptr);
  umem_clean_status(&ctx);
  EXPECT_EQ(umem_alloc(&ctx, 60), 0u);  // offset 0 is a valid address: the status tells
  EXPECT_TRUE(umem_is_ok(&ctx));
  umem_alloc(&ctx, 60);
  EXPECT_EQ(umem_get_status(&ctx), umemMemoryError);
  umem_dtor(&other);
  umem_dtor(&ctx);
}

// umemCuda where it cannot work: a build without CUDA, no device, a device out of range.
TEST(UmemCuda, StatusWithoutAUsableDevice) {
  umemCuda cuda;
  umemCuda_ctor(&cuda, -1);
  EXPECT_EQ(umem_get_status(&cuda), umemValueError);
  umem_dtor(&cuda);

  int count = device_count();
  umemCuda_ctor(&cuda, count);  // one past the last device (device 0 when there is none)
  if (!describe_cuda_environment().cuda_built) {
    EXPECT_EQ(umem_get_status(&cuda), umemNotImplementedError);
    EXPECT_NE(std::strstr(umem_get_message(&cuda), "WHOLESTORE_WITH_CUDA=OFF"), nullptr);
  } else if (count == 0) {
    EXPECT_EQ(umem_get_status(&cuda), umemRuntimeError);
    EXPECT_NE(std::strstr(umem_get_message(&cuda), "no CUDA device"), nullptr);
  } else {
    EXPECT_EQ(umem_get_status(&cuda), umemValueError);
    EXPECT_NE(std::strstr(umem_get_message(&cuda), "out of range"), nullptr);
  }
  EXPECT_NE(std::strstr(umem_get_message(&cuda), "umemCuda_ctor"), nullptr);
  // In error: calls do nothing; after cleaning, the unconstructed context says so.
  EXPECT_EQ(umem_alloc(&cuda, 16), 0u);
  umem_clean_status(&cuda);
  umem_alloc(&cuda, 16);
  EXPECT_EQ(umem_get_status(&cuda), umemValueError);
  umem_dtor(&cuda);
  EXPECT_STREQ(umem_get_device_name(&cuda), "Virtual");
}

TEST(UmemCuda, PairsNeedAGpu) {
  if (device_count() == 0)
    GTEST_SKIP() << "no CUDA device (or a build without CUDA): umemCuda copies run in "
                    "wholememory_gpu_tests (UmemCudaGpu.*) on a GPU machine";
  SUCCEED() << "a GPU is present: UmemCudaGpu.* in wholememory_gpu_tests covers umemCuda";
}

}  // namespace
