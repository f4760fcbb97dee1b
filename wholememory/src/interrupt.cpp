#include <wholememory/interrupt.hpp>

#include <atomic>

namespace wholememory {

namespace {
// Lock-free (checked below), so that a signal handler may set it.
std::atomic<bool> requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);
}  // namespace

void request_interrupt() noexcept { requested.store(true, std::memory_order_release); }

void clear_interrupt() noexcept { requested.store(false, std::memory_order_release); }

bool interrupt_requested() noexcept { return requested.load(std::memory_order_acquire); }

}  // namespace wholememory
