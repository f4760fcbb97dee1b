/*
 * The CUDA driver API functions the library uses (VMM, error names), found at run time through
 * the runtime's cudaGetDriverEntryPointByVersion instead of linking libcuda.so.  So binaries
 * built with CUDA still load on machines without a driver, where CUDA reports "no device" and
 * the GPU tests skip.  Internal to src/cuda/.
 */
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

namespace wholememory::detail {

/// Driver functions, by the ABI version current in CUDA 12.0 (matching the PFN types).
struct driver_api {
  PFN_cuGetErrorName_v6000 get_error_name = nullptr;
  PFN_cuGetErrorString_v6000 get_error_string = nullptr;
  PFN_cuDeviceGet_v2000 device_get = nullptr;
  PFN_cuDeviceGetAttribute_v2000 device_get_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 mem_get_allocation_granularity = nullptr;
  PFN_cuMemCreate_v10020 mem_create = nullptr;
  PFN_cuMemRelease_v10020 mem_release = nullptr;
  PFN_cuMemAddressReserve_v10020 mem_address_reserve = nullptr;
  PFN_cuMemAddressFree_v10020 mem_address_free = nullptr;
  PFN_cuMemMap_v10020 mem_map = nullptr;
  PFN_cuMemUnmap_v10020 mem_unmap = nullptr;
  PFN_cuMemSetAccess_v10020 mem_set_access = nullptr;
  PFN_cuMemExportToShareableHandle_v10020 mem_export_to_shareable_handle = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 mem_import_from_shareable_handle = nullptr;
};

/// The driver functions, looked up on first use (thread-safe).  Throws cuda_error when the
/// driver is missing or lacks one of them.
const driver_api& driver();

}  // namespace wholememory::detail
