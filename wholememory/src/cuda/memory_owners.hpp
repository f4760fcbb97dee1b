/*
 * Private to the allocator module (cuda_memory.cpp, device_buffers.cpp): the resource objects
 * that own what it allocates, maps or registers, and the helpers they share.  Every owner
 * releases in its destructor and never throws.  CUDA builds only.
 */
#pragma once

#include "cuda_memory.hpp"
#include "driver_api.hpp"

#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wholememory::detail {

/// "1.5 GiB (1610612736 bytes)", for messages.
std::string human_bytes(std::size_t bytes);

inline std::size_t align_down(std::size_t value, std::size_t alignment) {
  return value / alignment * alignment;
}

inline std::size_t align_up(std::size_t value, std::size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Number of visible devices, 0 when CUDA reports an error (no driver, no device).
int visible_device_count();
/// Throws logic_error when `device` is not a visible device.
void expect_valid_device(int device);
/// cudaMalloc with the size and device in the out-of-memory message.
void* device_malloc(std::size_t bytes, int device);

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

// ---- owners -----------------------------------------------------------------------------------

/// Device memory from cudaMalloc (own parts) and CUDA IPC mappings of other processes' parts.
class malloc_owner final : public resource {
 public:
  /// The GPU's large page.  A cudaMalloc whose size is not a multiple of it, opened in another
  /// process through cudaIpcOpenMemHandle, was read there at a small fraction of the rate of
  /// the same memory in whole pages: a two-rank chunked embedding table of 10M rows of 512 B
  /// (2.56e9 bytes a part) gathered 1M rows in 30 ms, against 0.84 ms for parts of 2.5 GiB,
  /// two ranks sharing one H100 (issue 10 saw 12.9 ms on two H200s; not re-measured there).
  /// Padding costs under 2 MiB a part.
  static constexpr std::size_t big_page_bytes = std::size_t{2} << 20;

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

  /// Allocates `bytes` on `device`, which must be current; nullptr for 0 bytes.  A part of
  /// 2 MiB or more is padded to a whole number of 2 MiB pages (see big_page_bytes).
  void* allocate(std::size_t bytes, int device) {
    if (bytes >= big_page_bytes)
      bytes = (bytes + big_page_bytes - 1) / big_page_bytes * big_page_bytes;
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

}  // namespace wholememory::detail
