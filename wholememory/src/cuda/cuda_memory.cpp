/*
 * The one allocator module: every raw device allocation of the library (cudaMalloc, cuMemCreate)
 * and its release lives here, together with the sharing of device memory between the local
 * ranks and the registration of host memory.
 *
 * Collective operations are built from local steps separated by bootstrap exchanges.  Each
 * local step runs inside collective_step, so a failure on one rank (out of memory, missing peer
 * access) makes every rank throw instead of leaving the others blocked in the next exchange.
 * Everything made so far is owned by a resource object from the start, so a throw at any step
 * releases it.
 *
 * Continuous device memory (CUDA VMM).  The partition's part boundaries need not be multiples
 * of the VMM granularity G, so the physical pieces are cut at G-aligned points:
 *   piece i = [align_down(offset_i, G), align_down(offset_{i+1}, G))   for i < n-1,
 *   piece n-1 = [align_down(offset_{n-1}, G), align_up(total, G)),
 * created on rank i's device.  The up to G bytes at the end of a part can thus sit on the next
 * rank's GPU; pieces may be empty.  G is the least common multiple of every rank's MINIMUM
 * granularity for a pinned device allocation: RECOMMENDED may be larger (more padding at the
 * end) and MINIMUM is what cuMemCreate/cuMemMap require, so it is the correct value to cut at.
 * Pieces move between processes as POSIX file descriptors (allgather_local_fds); between
 * threads of one process the generic allocation handle itself is used, without an import.
 *
 * This file holds the three memory types over ranks (VMM, CUDA IPC, own part only) and the
 * driver entry points; the owners are in memory_owners.hpp, the peer checks in peer_check.cpp,
 * plain buffers and host registration in device_buffers.cpp.
 */
#include "cuda_memory.hpp"
#include "collective_step.hpp"
#include "driver_api.hpp"
#include "fd_exchange.hpp"
#include "memory_owners.hpp"
#include "peer_check.hpp"
#include "posix.hpp"

#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iomanip>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace wholememory::detail {
namespace {
/// Physical VMM pieces [begin[i], begin[i+1]) for the partition (see the file comment).
std::vector<std::size_t> piece_bounds(const partition& parts, std::size_t granularity) {
  const int n = parts.num_parts();
  std::vector<std::size_t> bounds(n + 1);
  for (int i = 0; i < n; ++i) bounds[i] = align_down(parts.part_offset(i), granularity);
  bounds[n] = align_up(parts.total_bytes, granularity);
  return bounds;
}

bool has_other_process(const rank_topology& topo, int me) {
  for (long pid : topo.pids)
    if (pid != topo.pids[me]) return true;
  return false;
}

int local_index(const rank_topology& topo, int rank) {
  auto it = std::find(topo.local_ranks.begin(), topo.local_ranks.end(), rank);
  return it == topo.local_ranks.end() ? -1 : static_cast<int>(it - topo.local_ranks.begin());
}

void check_partition(const partition& parts) {
  WM_EXPECTS(parts.num_parts() >= 1, "a partition needs at least one part");
  WM_EXPECTS(parts.offsets.front() == 0 && parts.offsets.back() == parts.total_bytes,
             "partition offsets must run from 0 to the total " << parts.total_bytes);
  for (int i = 0; i < parts.num_parts(); ++i) {
    WM_EXPECTS(parts.offsets[i] <= parts.offsets[i + 1],
               "partition offsets must not decrease (part " << i << ")");
  }
}

// ---- the three types over ranks -----------------------------------------------------------

device_allocation allocate_continuous(bootstrap& bs, const rank_topology& topo,
                                      const partition& parts, int device) {
  const int me = bs.rank();
  const int n = bs.size();
  const char* what = "allocating continuous device memory";
  WM_EXPECTS(topo.num_hosts == 1,
             "continuous device memory needs every rank on one host, the communicator spans "
                 << topo.num_hosts << " hosts; split it by host or use distributed memory");
  const bool cross_process = has_other_process(topo, me);

  std::vector<device_info> info = exchange_device_info(bs, device, true, cross_process, what);
  std::vector<int> ordinals = local_ordinals(info, topo, me);
  collective_peer_check(bs, topo, device, ordinals, what);

  std::size_t granularity = 1;
  for (const device_info& i : info) granularity = std::lcm(granularity, std::size_t(i.granularity));
  const std::vector<std::size_t> bounds = piece_bounds(parts, granularity);
  const std::size_t my_piece = bounds[me + 1] - bounds[me];

  auto owner = std::make_unique<vmm_owner>(std::vector<int>{device});
  CUmemGenericAllocationHandle my_handle = 0;
  unique_fd my_fd;
  collective_step(bs, what, [&] {
    if (my_piece == 0) return;
    device_guard guard(device);
    my_handle = owner->create(my_piece, device, cross_process);
    if (cross_process) {
      int fd = -1;
      WM_CU_TRY(driver().mem_export_to_shareable_handle(
          &fd, my_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
      my_fd.reset(fd);
    }
  });

  // Threads of this process use each other's handles directly.
  std::vector<std::uint64_t> handles(n);
  std::uint64_t my_handle_value = my_handle;
  bs.allgather(&my_handle_value, handles.data(), sizeof(std::uint64_t));

  std::vector<unique_fd> local_fds;
  if (cross_process) {
    collective_step(bs, what, [&] { local_fds = allgather_local_fds(bs, topo, my_fd.get()); });
    my_fd.reset();
  }

  collective_step(bs, what, [&] {
    device_guard guard(device);
    owner->reserve(bounds[n], granularity);
    for (int j = 0; j < n; ++j) {
      const std::size_t bytes = bounds[j + 1] - bounds[j];
      if (bytes == 0) continue;
      CUmemGenericAllocationHandle handle = 0;
      if (j == me) {
        handle = my_handle;
      } else if (topo.pids[j] == topo.pids[me]) {
        handle = static_cast<CUmemGenericAllocationHandle>(handles[j]);
      } else {
        const int lj = local_index(topo, j);
        WM_EXPECTS(lj >= 0 && lj < static_cast<int>(local_fds.size()) && local_fds[lj].valid(),
                   "rank " << j << " passed no file descriptor for its " << human_bytes(bytes)
                           << " piece");
        handle = owner->import(local_fds[lj].get(), j);
      }
      owner->map(bounds[j], bytes, handle);
    }
    owner->set_access({device});
  });
  local_fds.clear();

  device_allocation result;
  result.base = parts.total_bytes > 0 ? owner->base() : nullptr;
  result.part_ptrs.resize(n, nullptr);
  result.part_devices = ordinals;
  if (result.base != nullptr) {
    for (int i = 0; i < n; ++i) {
      result.part_ptrs[i] = static_cast<char*>(result.base) + parts.part_offset(i);
    }
  }
  result.owner = std::move(owner);
  return result;
}

device_allocation allocate_chunked(bootstrap& bs, const rank_topology& topo, const partition& parts,
                                   int device) {
  const int me = bs.rank();
  const int n = bs.size();
  const char* what = "allocating chunked device memory";
  const bool cross_process = has_other_process(topo, me);

  std::vector<device_info> info = exchange_device_info(bs, device, false, false, what);
  std::vector<int> ordinals = local_ordinals(info, topo, me);
  collective_peer_check(bs, topo, device, ordinals, what);

  struct ipc_entry {
    cudaIpcMemHandle_t handle;
    std::uint64_t ptr;
    std::uint64_t bytes;
  };
  auto owner = std::make_unique<malloc_owner>();
  ipc_entry mine{};
  void* my_ptr = nullptr;
  collective_step(bs, what, [&] {
    const std::size_t bytes = parts.part_bytes(me);
    if (bytes == 0) return;
    device_guard guard(device);
    my_ptr = owner->allocate(bytes, device);
    if (cross_process) WM_CUDA_TRY(cudaIpcGetMemHandle(&mine.handle, my_ptr));
    mine.ptr = reinterpret_cast<std::uintptr_t>(my_ptr);
    mine.bytes = bytes;
  });
  std::vector<ipc_entry> all(n);
  bs.allgather(&mine, all.data(), sizeof(ipc_entry));

  device_allocation result;
  result.part_ptrs.assign(n, nullptr);
  result.part_devices = ordinals;
  result.part_ptrs[me] = my_ptr;
  collective_step(bs, what, [&] {
    device_guard guard(device);
    for (int j : topo.local_ranks) {
      if (j == me || all[j].bytes == 0) continue;
      if (topo.pids[j] == topo.pids[me]) {
        // Threads of one process share the pointer; their devices need peer access enabled.
        enable_peer_access(device, ordinals[j]);
        result.part_ptrs[j] = reinterpret_cast<void*>(static_cast<std::uintptr_t>(all[j].ptr));
      } else {
        result.part_ptrs[j] = owner->open_ipc(all[j].handle, device, j);
      }
    }
  });
  result.owner = std::move(owner);
  return result;
}

device_allocation allocate_distributed(bootstrap& bs, const rank_topology& topo,
                                       const partition& parts, int device) {
  const int me = bs.rank();
  const char* what = "allocating distributed device memory";
  std::vector<device_info> info = exchange_device_info(bs, device, false, false, what);
  auto owner = std::make_unique<malloc_owner>();
  void* my_ptr = nullptr;
  collective_step(bs, what, [&] {
    device_guard guard(device);
    my_ptr = owner->allocate(parts.part_bytes(me), device);
  });
  device_allocation result;
  result.part_ptrs.assign(bs.size(), nullptr);
  result.part_ptrs[me] = my_ptr;
  result.part_devices = local_ordinals(info, topo, me);
  result.owner = std::move(owner);
  return result;
}

/// Looks up one driver function through the runtime.
template <typename Function>
void load_driver_function(Function& function, const char* name) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, &address, 12000, cudaEnableDefault, &status);
  if (err != cudaSuccess) {
    cudaGetLastError();
    WM_FAIL(cuda_error,
            "looking up the CUDA driver function " << name << " failed: " << cuda_error_text(err));
  }
  if (status != cudaDriverEntryPointSuccess || address == nullptr) {
    WM_FAIL(cuda_error, "the CUDA driver has no " << name << " (ABI of CUDA 12.0; lookup status "
                                                  << static_cast<int>(status)
                                                  << "); update the driver");
  }
  function = reinterpret_cast<Function>(address);
}

driver_api load_driver_api() {
  driver_api api;
  load_driver_function(api.get_error_name, "cuGetErrorName");
  load_driver_function(api.get_error_string, "cuGetErrorString");
  load_driver_function(api.device_get, "cuDeviceGet");
  load_driver_function(api.device_get_attribute, "cuDeviceGetAttribute");
  load_driver_function(api.mem_get_allocation_granularity, "cuMemGetAllocationGranularity");
  load_driver_function(api.mem_create, "cuMemCreate");
  load_driver_function(api.mem_release, "cuMemRelease");
  load_driver_function(api.mem_address_reserve, "cuMemAddressReserve");
  load_driver_function(api.mem_address_free, "cuMemAddressFree");
  load_driver_function(api.mem_map, "cuMemMap");
  load_driver_function(api.mem_unmap, "cuMemUnmap");
  load_driver_function(api.mem_set_access, "cuMemSetAccess");
  load_driver_function(api.mem_export_to_shareable_handle, "cuMemExportToShareableHandle");
  load_driver_function(api.mem_import_from_shareable_handle, "cuMemImportFromShareableHandle");
  return api;
}

}  // namespace

// ---- public entry points --------------------------------------------------------------------

const driver_api& driver() {
  // A throw leaves the static uninitialized, so a later call tries again.
  static const driver_api api = load_driver_api();
  return api;
}

std::string cu_result_text(CUresult res) {
  const char* name = nullptr;
  const char* text = nullptr;
  try {
    const driver_api& api = driver();
    if (api.get_error_name(res, &name) != CUDA_SUCCESS) name = nullptr;
    if (api.get_error_string(res, &text) != CUDA_SUCCESS) text = nullptr;
  } catch (const std::exception&) {
    name = nullptr;
    text = nullptr;
  }
  return std::string(name != nullptr ? name : "CUresult") + " (" +
         std::to_string(static_cast<int>(res)) + ")" + (text != nullptr ? ": " : "") +
         (text != nullptr ? text : "");
}

device_allocation allocate_device(bootstrap& bs, const rank_topology& topology,
                                  const partition& parts, memory_type type, int device) {
  WM_EXPECTS(parts.num_parts() == bs.size(),
             "device allocation over " << bs.size()
                                       << " ranks needs one part per rank, the partition has "
                                       << parts.num_parts());
  WM_EXPECTS(static_cast<int>(topology.pids.size()) == bs.size() &&
                 static_cast<int>(topology.host_of_rank.size()) == bs.size(),
             "the topology describes " << topology.pids.size() << " ranks, the bootstrap has "
                                       << bs.size());
  check_partition(parts);
  switch (type) {
    case memory_type::continuous:
      return allocate_continuous(bs, topology, parts, device);
    case memory_type::chunked:
      return allocate_chunked(bs, topology, parts, device);
    case memory_type::distributed:
      return allocate_distributed(bs, topology, parts, device);
  }
  WM_FAIL(logic_error, "unknown memory type " << static_cast<int>(type));
}

device_allocation allocate_device_single_process(const partition& parts, memory_type type,
                                                 const std::vector<int>& devices) {
  const int n = parts.num_parts();
  WM_EXPECTS(static_cast<int>(devices.size()) == n,
             "single-process allocation over " << devices.size()
                                               << " devices needs one part per device, the "
                                                  "partition has "
                                               << n);
  WM_EXPECTS(type != memory_type::distributed,
             "distributed memory needs one rank per part; single-process multi-GPU mode "
             "supports continuous and chunked memory");
  check_partition(parts);
  for (int d : devices) expect_valid_device(d);

  std::vector<int> distinct;
  for (int d : devices)
    if (std::find(distinct.begin(), distinct.end(), d) == distinct.end()) distinct.push_back(d);
  for (int d : distinct) check_peer_access(d, distinct, std::vector<int>(distinct.size(), -1));

  device_allocation result;
  result.part_ptrs.assign(n, nullptr);
  result.part_devices = devices;

  if (type == memory_type::continuous) {
    std::size_t granularity = 1;
    for (int d : distinct) {
      device_guard guard(d);
      granularity = std::lcm(granularity, vmm_granularity(d, false));
    }
    const std::vector<std::size_t> bounds = piece_bounds(parts, granularity);
    auto owner = std::make_unique<vmm_owner>(distinct);
    device_guard guard(devices.front());
    owner->reserve(bounds[n], granularity);
    for (int i = 0; i < n; ++i) {
      const std::size_t bytes = bounds[i + 1] - bounds[i];
      if (bytes == 0) continue;
      CUmemGenericAllocationHandle handle = owner->create(bytes, devices[i], false);
      owner->map(bounds[i], bytes, handle);
    }
    owner->set_access(distinct);
    if (parts.total_bytes > 0) {
      result.base = owner->base();
      for (int i = 0; i < n; ++i) {
        result.part_ptrs[i] = static_cast<char*>(result.base) + parts.part_offset(i);
      }
    }
    result.owner = std::move(owner);
    return result;
  }

  auto owner = std::make_unique<malloc_owner>();
  for (int i = 0; i < n; ++i) {
    device_guard guard(devices[i]);
    result.part_ptrs[i] = owner->allocate(parts.part_bytes(i), devices[i]);
  }
  // Kernels on any listed device read every part.
  for (int d : distinct) {
    device_guard guard(d);
    for (int peer : distinct) enable_peer_access(d, peer);
  }
  result.owner = std::move(owner);
  return result;
}

}  // namespace wholememory::detail
