/*
 * Private to the library: state a module keeps with one allocation for the allocation's life
 * (the distributed gathers' peer-written receive buffers: gather_exchange.cu, gather.cpp). Released
 * when the allocation is freed, before its own memory, after the free's barrier.
 */
#pragma once

#include <wholememory/allocation.hpp>

#include <memory>

namespace wholememory::detail {

struct allocation_access {
  /// The slot; empty until a module fills it.  Not synchronized: the calls that use it are
  /// collectives on the allocation's communicator, which one thread drives at a time.
  static std::shared_ptr<void>& exchange_state(const allocation& a);
  /// The same for the CPU path (gather.cpp).  A distributed allocation's communicator is NCCL
  /// (GPU path) or host (CPU path), so at most one of the two slots is ever filled; two slots
  /// keep their types apart all the same.
  static std::shared_ptr<void>& host_exchange_state(const allocation& a);
};

}  // namespace wholememory::detail
