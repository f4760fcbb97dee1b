/*
 * cuda_stream and cuda_event without a GPU: objects made from nullptr and moved-from objects
 * hold nothing and release nothing, moves hand the handle over, and a build without CUDA makes
 * the types harmless (no handle, no-op operations, elapsed_ms refused).  The test process never
 * calls CUDA itself (forked GPU tests need that): every object here holds no handle in a build
 * with CUDA.  What owns a real handle is tested in gpu/cuda_stream_gpu_test.cpp.
 */
#include <wholememory/cuda_stream.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <type_traits>
#include <utility>

namespace {

using wholememory::cuda_event;
using wholememory::cuda_stream;

static_assert(!std::is_copy_constructible_v<cuda_stream> &&
              !std::is_copy_assignable_v<cuda_stream>);
static_assert(std::is_nothrow_move_constructible_v<cuda_stream> &&
              std::is_nothrow_move_assignable_v<cuda_stream>);
static_assert(!std::is_copy_constructible_v<cuda_event> && !std::is_copy_assignable_v<cuda_event>);
static_assert(std::is_nothrow_move_constructible_v<cuda_event> &&
              std::is_nothrow_move_assignable_v<cuda_event>);
// The view a function taking a stream or an event accepts.
static_assert(std::is_convertible_v<const cuda_stream&, cudaStream_t>);
static_assert(std::is_convertible_v<const cuda_event&, cudaEvent_t>);

TEST(CudaStream, FromNullptrHoldsNoStream) {
  cuda_stream s = nullptr;
  EXPECT_EQ(s.value(), nullptr);
  EXPECT_EQ(static_cast<cudaStream_t>(s), nullptr);
  s.synchronize();  // nothing to wait for
  s.synchronize_no_throw();
  s.reset();
  EXPECT_EQ(s.value(), nullptr);
}

TEST(CudaStream, MovesLeaveTheSourceEmpty) {
  cuda_stream a = nullptr;
  cuda_stream b(std::move(a));
  EXPECT_EQ(a.value(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(b.value(), nullptr);
  cuda_stream c = nullptr;
  c = std::move(b);
  EXPECT_EQ(c.value(), nullptr);
}

TEST(CudaEvent, FromNullptrHoldsNoEvent) {
  cuda_event e = nullptr;
  EXPECT_EQ(e.value(), nullptr);
  EXPECT_EQ(static_cast<cudaEvent_t>(e), nullptr);
  e.reset();
  cuda_event f(std::move(e));
  EXPECT_EQ(e.value(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(f.value(), nullptr);
  cuda_event g = nullptr;
  g = std::move(f);
  EXPECT_EQ(g.value(), nullptr);
}

TEST(CudaEvent, ElapsedTimeOfEmptyEventsIsRefused) {
  // In either build: with CUDA, neither object holds an event; without, there is no clock.
  const cuda_event start = nullptr, end = nullptr;
  EXPECT_THROW(wholememory::elapsed_ms(start, end), wholememory::logic_error);
}

#if defined(WHOLESTORE_HAS_CUDA)

TEST(CudaEvent, OperationsOnAnEmptyEventAreRefused) {
  cuda_event e = nullptr;
  EXPECT_THROW(e.record(nullptr), wholememory::logic_error);
  EXPECT_THROW(e.wait(nullptr), wholememory::logic_error);
  EXPECT_THROW(e.synchronize(), wholememory::logic_error);
}

#else

TEST(CudaStreamNoCuda, ConstructionIsHarmlessAndHoldsNothing) {
  cuda_stream s;  // non-blocking by default
  cuda_stream blocking(wholememory::stream_flags::blocking);
  EXPECT_EQ(s.value(), nullptr);
  EXPECT_EQ(blocking.value(), nullptr);
  s.synchronize();
  cuda_event e;  // without timing by default
  cuda_event timed(wholememory::event_flags::timing);
  EXPECT_EQ(e.value(), nullptr);
  EXPECT_EQ(timed.value(), nullptr);
  // Streams are nullptr in host-only builds everywhere; the operations do nothing.
  e.record(s);
  e.wait(s);
  e.synchronize();
  timed.record(s);
  EXPECT_THROW(wholememory::elapsed_ms(timed, timed), wholememory::logic_error);
}

#endif

}  // namespace
