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
 */
#include "cuda_memory.hpp"
#include "collective_step.hpp"
#include "driver_api.hpp"
#include "fd_exchange.hpp"
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

std::string human_bytes(std::size_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  std::ostringstream os;
  if (unit == 0) {
    os << bytes << " B";
  } else {
    os << std::setprecision(4) << value << ' ' << units[unit] << " (" << bytes << " bytes)";
  }
  return os.str();
}

std::size_t align_down(std::size_t value, std::size_t alignment) {
  return value / alignment * alignment;
}

std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Number of visible devices, 0 when CUDA reports an error (no driver, no device).
int visible_device_count() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void expect_valid_device(int device) {
  int count = visible_device_count();
  WM_EXPECTS(device >= 0 && device < count,
             "CUDA device " << device << " is not one of the " << count << " visible devices");
}

/// Restores the caller's device when it goes out of scope; for destructors (never throws).
class quiet_device_restore {
 public:
  quiet_device_restore() {
    if (cudaGetDevice(&previous_) != cudaSuccess) {
      cudaGetLastError();
      previous_ = -1;
    }
  }
  quiet_device_restore(const quiet_device_restore&) = delete;
  quiet_device_restore& operator=(const quiet_device_restore&) = delete;
  ~quiet_device_restore() {
    if (previous_ >= 0) WM_CUDA_WARN(cudaSetDevice(previous_));
  }

 private:
  int previous_ = -1;
};

/// cudaMalloc with the size and device in the out-of-memory message.
void* device_malloc(std::size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      WM_FAIL(out_of_memory, "out of memory allocating "
                                 << human_bytes(bytes) << " on device " << device
                                 << ": cudaMalloc failed: " << cuda_error_text(err));
    }
    WM_FAIL(cuda_error, "cudaMalloc of " << human_bytes(bytes) << " on device " << device
                                         << " failed: " << cuda_error_text(err));
  }
  return ptr;
}

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

// ---- owners -----------------------------------------------------------------------------------

/// Device memory from cudaMalloc (own parts) and CUDA IPC mappings of other processes' parts.
class malloc_owner final : public resource {
 public:
  struct block {
    int device;
    void* ptr;
  };

  ~malloc_owner() override {
    quiet_device_restore restore;
    for (const block& b : ipc_opened_) {
      WM_CUDA_WARN(cudaSetDevice(b.device));
      WM_CUDA_WARN(cudaIpcCloseMemHandle(b.ptr));
    }
    for (const block& b : allocated_) {
      WM_CUDA_WARN(cudaSetDevice(b.device));
      WM_CUDA_WARN(cudaFree(b.ptr));
    }
  }

  /// Allocates `bytes` on `device`, which must be current; nullptr for 0 bytes.
  void* allocate(std::size_t bytes, int device) {
    void* ptr = device_malloc(bytes, device);
    if (ptr != nullptr) allocated_.push_back({device, ptr});
    return ptr;
  }

  /// Opens another process's allocation on `device`, which must be current.
  void* open_ipc(const cudaIpcMemHandle_t& handle, int device, int owner_rank) {
    void* ptr = nullptr;
    cudaError_t err = cudaIpcOpenMemHandle(&ptr, handle, cudaIpcMemLazyEnablePeerAccess);
    if (err != cudaSuccess) {
      cudaGetLastError();
      WM_FAIL(cuda_error, "cudaIpcOpenMemHandle of rank " << owner_rank << "'s part on device "
                                                          << device
                                                          << " failed: " << cuda_error_text(err));
    }
    ipc_opened_.push_back({device, ptr});
    return ptr;
  }

 private:
  std::vector<block> allocated_;
  std::vector<block> ipc_opened_;
};

/// One reserved virtual range with physical pieces mapped into it (CUDA VMM).  Releases the
/// handles it created or imported; handles borrowed from threads of this process are released
/// by their creators (the driver frees the memory once every mapping and handle is gone).
class vmm_owner final : public resource {
 public:
  explicit vmm_owner(std::vector<int> devices) : devices_(std::move(devices)) {}

  ~vmm_owner() override {
    quiet_device_restore restore;
    if (!mapped_.empty()) {
      // cuMemUnmap does not wait for kernels still using the range; cudaFree would.
      for (int device : devices_) {
        WM_CUDA_WARN(cudaSetDevice(device));
        WM_CUDA_WARN(cudaDeviceSynchronize());
      }
    }
    if (!devices_.empty()) WM_CUDA_WARN(cudaSetDevice(devices_.front()));
    for (const auto& m : mapped_) WM_CU_WARN(driver().mem_unmap(m.first, m.second));
    for (CUmemGenericAllocationHandle h : owned_handles_) WM_CU_WARN(driver().mem_release(h));
    if (reserved_bytes_ > 0) WM_CU_WARN(driver().mem_address_free(base_, reserved_bytes_));
  }

  void reserve(std::size_t bytes, std::size_t alignment) {
    if (bytes == 0) return;
    WM_CU_TRY(driver().mem_address_reserve(&base_, bytes, alignment, 0, 0));
    reserved_bytes_ = bytes;
  }

  /// Creates a piece of `bytes` on `device`; the handle is released with this owner.
  CUmemGenericAllocationHandle create(std::size_t bytes, int device, bool exportable) {
    CUmemAllocationProp prop = allocation_prop(device, exportable);
    CUmemGenericAllocationHandle handle = 0;
    CUresult res = driver().mem_create(&handle, bytes, &prop, 0);
    if (res == CUDA_ERROR_OUT_OF_MEMORY) {
      WM_FAIL(out_of_memory, "out of memory creating "
                                 << human_bytes(bytes) << " on device " << device
                                 << ": cuMemCreate failed: " << cu_result_text(res));
    }
    if (res != CUDA_SUCCESS) {
      WM_FAIL(cuda_error, "cuMemCreate of " << human_bytes(bytes) << " on device " << device
                                            << " failed: " << cu_result_text(res));
    }
    owned_handles_.push_back(handle);
    return handle;
  }

  /// Imports a piece from a file descriptor; the handle is released with this owner.
  CUmemGenericAllocationHandle import(int fd, int owner_rank) {
    CUmemGenericAllocationHandle handle = 0;
    CUresult res = driver().mem_import_from_shareable_handle(
        &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (res != CUDA_SUCCESS) {
      WM_FAIL(cuda_error, "cuMemImportFromShareableHandle of rank "
                              << owner_rank << "'s piece failed: " << cu_result_text(res));
    }
    owned_handles_.push_back(handle);
    return handle;
  }

  /// Maps `handle` (a piece of `bytes`) at byte `offset` of the reserved range.
  void map(std::size_t offset, std::size_t bytes, CUmemGenericAllocationHandle handle) {
    CUdeviceptr at = base_ + offset;
    WM_CU_TRY(driver().mem_map(at, bytes, 0, handle, 0));
    mapped_.emplace_back(at, bytes);
  }

  /// Grants read/write access to the whole range to each of `devices`.
  void set_access(const std::vector<int>& devices) {
    if (reserved_bytes_ == 0) return;
    std::vector<CUmemAccessDesc> access;
    for (int device : devices) {
      bool seen = false;
      for (const CUmemAccessDesc& a : access) seen = seen || a.location.id == device;
      if (seen) continue;
      CUmemAccessDesc desc{};
      desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      desc.location.id = device;
      desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      access.push_back(desc);
    }
    WM_CU_TRY(driver().mem_set_access(base_, reserved_bytes_, access.data(), access.size()));
  }

  void* base() const { return reinterpret_cast<void*>(base_); }

  static CUmemAllocationProp allocation_prop(int device, bool exportable) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    prop.requestedHandleTypes =
        exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    return prop;
  }

 private:
  std::vector<int> devices_;
  CUdeviceptr base_ = 0;
  std::size_t reserved_bytes_ = 0;
  std::vector<std::pair<CUdeviceptr, std::size_t>> mapped_;
  std::vector<CUmemGenericAllocationHandle> owned_handles_;
};

/// Plain device memory from allocate_device_buffer / copy_view_to_device.
class buffer_owner final : public resource {
 public:
  buffer_owner(int device, void* ptr) : device_(device), ptr_(ptr) {}
  ~buffer_owner() override {
    if (ptr_ == nullptr) return;
    quiet_device_restore restore;
    WM_CUDA_WARN(cudaSetDevice(device_));
    WM_CUDA_WARN(cudaFree(ptr_));
  }

 private:
  int device_;
  void* ptr_;
};

/// Page-locked, mapped host memory; unregistered on destruction.
class host_registration final : public resource {
 public:
  explicit host_registration(void* ptr) : ptr_(ptr) {}
  ~host_registration() override { WM_CUDA_WARN(cudaHostUnregister(ptr_)); }

 private:
  void* ptr_;
};

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

/// What each rank tells the others about its device.
struct device_info {
  char pci_bus_id[64];
  std::uint64_t granularity;  // VMM granularity, 0 when not asked for
  std::int32_t device;        // ordinal in the rank's own process
  std::int32_t unused;
};

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

bool cuda_device_present() { return visible_device_count() > 0; }

int current_device() {
  WM_EXPECTS(cuda_device_present(), "no CUDA device is visible to this process");
  int device = -1;
  WM_CUDA_TRY(cudaGetDevice(&device));
  return device;
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

std::unique_ptr<resource> register_host_memory(void* ptr, std::size_t bytes) {
  if (bytes == 0 || ptr == nullptr || !cuda_device_present()) return nullptr;
  cudaError_t err = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (err == cudaErrorMemoryAllocation) {
      WM_FAIL(out_of_memory, "out of memory registering "
                                 << human_bytes(bytes)
                                 << " of host memory with CUDA: " << cuda_error_text(err));
    }
    WM_FAIL(cuda_error, "cudaHostRegister of " << human_bytes(bytes) << " at " << ptr
                                               << " failed: " << cuda_error_text(err));
  }
  auto owner = std::make_unique<host_registration>(ptr);
  void* device_ptr = nullptr;
  WM_CUDA_TRY(cudaHostGetDevicePointer(&device_ptr, ptr, 0));
  if (device_ptr != ptr) {
    WM_FAIL(cuda_error,
            "registered host memory at "
                << ptr << " has device address " << device_ptr
                << "; wholestore needs unified addressing (the same address on host and "
                   "device)");
  }
  return owner;
}

std::unique_ptr<resource> allocate_device_buffer(std::size_t bytes, int device, void** ptr) {
  WM_EXPECTS(ptr != nullptr, "allocate_device_buffer needs an output pointer");
  *ptr = nullptr;
  expect_valid_device(device);
  device_guard guard(device);
  void* p = device_malloc(bytes, device);
  auto owner = std::make_unique<buffer_owner>(device, p);
  *ptr = p;
  return owner;
}

std::unique_ptr<resource> copy_view_to_device(const chunked_view& view, int device,
                                              const chunked_view** device_ptr) {
  WM_EXPECTS(device_ptr != nullptr, "copy_view_to_device needs an output pointer");
  *device_ptr = nullptr;
  expect_valid_device(device);
  device_guard guard(device);
  void* p = device_malloc(sizeof(chunked_view), device);
  auto owner = std::make_unique<buffer_owner>(device, p);
  // The legacy stream, then a wait on it: the copy has landed when this returns, whatever
  // stream the caller's kernels use next.
  WM_CUDA_TRY(
      cudaMemcpyAsync(p, &view, sizeof(chunked_view), cudaMemcpyHostToDevice, cudaStreamLegacy));
  WM_CUDA_TRY(cudaStreamSynchronize(cudaStreamLegacy));
  *device_ptr = static_cast<const chunked_view*>(p);
  return owner;
}

}  // namespace wholememory::detail
