/*
 * Private to the allocator module (cuda_memory.cpp): device queries and the collective checks
 * made before device memory is shared between the local ranks (peer access, VMM support).
 * CUDA builds only.
 */
#pragma once

#include "cuda_memory.hpp"

#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wholememory::detail {

/// Enables peer access from the current device (`device`) to `peer`; already enabled is fine.
void enable_peer_access(int device, int peer);

/// Checks that `device` supports VMM (and POSIX fd export when `exportable`) and returns its
/// MINIMUM granularity for a pinned device allocation.  `device` must be current.
std::size_t vmm_granularity(int device, bool exportable);

std::string pci_bus_id(int device);

/// Throws logic_error listing the pairs of `devices` (ordinals of this process, -1 skipped)
/// where `from` cannot access them.
void check_peer_access(int from, const std::vector<int>& peers, const std::vector<int>& peer_ranks);

/// What each rank tells the others about its device.
struct device_info {
  char pci_bus_id[64];
  std::uint64_t granularity;  // VMM granularity, 0 when not asked for
  std::int32_t device;        // ordinal in the rank's own process
  std::int32_t unused;
};

/// Collective: every rank's device_info; checks `device` and, for `vmm`, its VMM support.
std::vector<device_info> exchange_device_info(bootstrap& bs, int device, bool vmm, bool exportable,
                                              const char* what);

/// Device ordinal of every rank's device in this process: the rank's own ordinal for ranks of
/// this process, the ordinal of its PCI bus id for other processes of this host (-1 when that
/// device is not visible here), -1 for ranks on other hosts.
std::vector<int> local_ordinals(const std::vector<device_info>& info, const rank_topology& topo,
                                int me);

/// Collective peer-access check of this rank's device against every other local rank's.
void collective_peer_check(bootstrap& bs, const rank_topology& topo, int device,
                           const std::vector<int>& ordinals, const char* what);

}  // namespace wholememory::detail
