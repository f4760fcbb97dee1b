// Device queries and the peer-access checks of the allocator module (peer_check.hpp).
#include "peer_check.hpp"

#include "collective_step.hpp"
#include "driver_api.hpp"
#include "memory_owners.hpp"

#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace wholememory::detail {

/// Enables peer access from the current device (`device`) to `peer`; already enabled is fine.
void enable_peer_access(int device, int peer) {
  if (device == peer) return;
  cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return;
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    WM_FAIL(cuda_error, "cudaDeviceEnablePeerAccess from device "
                            << device << " to device " << peer
                            << " failed: " << cuda_error_text(err));
  }
}

// ---- device queries -------------------------------------------------------------------------

/// Checks that `device` supports VMM (and POSIX fd export when `exportable`) and returns its
/// MINIMUM granularity for a pinned device allocation.  `device` must be current.
std::size_t vmm_granularity(int device, bool exportable) {
  CUdevice cu_device = 0;
  WM_CU_TRY(driver().device_get(&cu_device, device));
  int vmm = 0;
  WM_CU_TRY(driver().device_get_attribute(
      &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, cu_device));
  WM_EXPECTS(vmm != 0, "device " << device
                                 << " does not support CUDA virtual memory management, which "
                                    "continuous device memory needs; use chunked memory");
  if (exportable) {
    int fd_handles = 0;
    WM_CU_TRY(driver().device_get_attribute(
        &fd_handles, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, cu_device));
    WM_EXPECTS(fd_handles != 0,
               "device " << device
                         << " cannot export VMM allocations as POSIX file descriptors, which "
                            "continuous device memory over several processes needs; use chunked "
                            "memory");
  }
  CUmemAllocationProp prop = vmm_owner::allocation_prop(device, exportable);
  std::size_t granularity = 0;
  WM_CU_TRY(driver().mem_get_allocation_granularity(&granularity, &prop,
                                                    CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  WM_EXPECTS(granularity > 0, "device " << device << " reports VMM granularity 0");
  return granularity;
}

std::string pci_bus_id(int device) {
  char id[64] = {};
  WM_CUDA_TRY(cudaDeviceGetPCIBusId(id, sizeof(id) - 1, device));
  return id;
}

/// Throws logic_error listing the pairs of `devices` (ordinals of this process, -1 skipped)
/// where `from` cannot access them.
void check_peer_access(int from, const std::vector<int>& peers,
                       const std::vector<int>& peer_ranks) {
  std::ostringstream missing;
  int count = 0;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    int peer = peers[i];
    if (peer < 0 || peer == from) continue;
    int can = 0;
    WM_CUDA_TRY(cudaDeviceCanAccessPeer(&can, from, peer));
    if (can == 0) {
      missing << (count++ ? ", " : "") << "device " << from << " (" << pci_bus_id(from)
              << ") -> device " << peer << " (" << pci_bus_id(peer) << ")";
      if (peer_ranks[i] >= 0) missing << " of rank " << peer_ranks[i];
    }
  }
  if (count > 0) {
    WM_FAIL(logic_error, "no peer access between the local GPUs: "
                             << missing.str()
                             << "; continuous and chunked device memory map every local GPU's "
                                "part on every local GPU: use distributed memory or host memory");
  }
}

/// Collective: every rank's device_info; checks `device` and, for `vmm`, its VMM support.
std::vector<device_info> exchange_device_info(bootstrap& bs, int device, bool vmm, bool exportable,
                                              const char* what) {
  device_info mine{};
  collective_step(bs, what, [&] {
    expect_valid_device(device);
    device_guard guard(device);
    std::string id = pci_bus_id(device);
    std::snprintf(mine.pci_bus_id, sizeof(mine.pci_bus_id), "%s", id.c_str());
    mine.granularity = vmm ? vmm_granularity(device, exportable) : 0;
    mine.device = device;
  });
  std::vector<device_info> all(bs.size());
  bs.allgather(&mine, all.data(), sizeof(device_info));
  return all;
}

/// Device ordinal of every rank's device in this process: the rank's own ordinal for ranks of
/// this process, the ordinal of its PCI bus id for other processes of this host (-1 when that
/// device is not visible here), -1 for ranks on other hosts.
std::vector<int> local_ordinals(const std::vector<device_info>& info, const rank_topology& topo,
                                int me) {
  std::vector<int> ordinals(info.size(), -1);
  for (std::size_t j = 0; j < info.size(); ++j) {
    if (topo.host_of_rank[j] != topo.host_of_rank[me]) continue;
    if (topo.pids[j] == topo.pids[me]) {
      ordinals[j] = info[j].device;
      continue;
    }
    int ordinal = -1;
    if (cudaDeviceGetByPCIBusId(&ordinal, info[j].pci_bus_id) != cudaSuccess) {
      cudaGetLastError();
      ordinal = -1;
    }
    ordinals[j] = ordinal;
  }
  return ordinals;
}

/// Collective peer-access check of this rank's device against every other local rank's.
void collective_peer_check(bootstrap& bs, const rank_topology& topo, int device,
                           const std::vector<int>& ordinals, const char* what) {
  collective_step(bs, what, [&] {
    if (topo.local_size <= 1) return;
    std::vector<int> peers;
    std::vector<int> ranks;
    for (int j : topo.local_ranks) {
      if (j == bs.rank()) continue;
      peers.push_back(ordinals[j]);
      ranks.push_back(j);
    }
    check_peer_access(device, peers, ranks);
  });
}

}  // namespace wholememory::detail
