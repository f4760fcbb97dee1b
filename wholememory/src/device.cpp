// Device utilities usable without CUDA headers in the caller (device.hpp).
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <cstring>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace wholememory {

int device_count() {
#if defined(WHOLESTORE_HAS_CUDA)
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

void set_device(int device) {
  int count = device_count();
  WM_EXPECTS(device >= 0 && device < count,
             "CUDA device " << device << " does not exist; " << count << " visible");
#if defined(WHOLESTORE_HAS_CUDA)
  cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess)
    WM_FAIL(cuda_error, "cudaSetDevice(" << device << "): " << cudaGetErrorString(err));
#endif
}

int default_device(const communicator& comm) {
  int count = device_count();
  WM_EXPECTS(count > 0, "rank " << comm.rank() << " needs a CUDA device and none is visible");
  return comm.local_rank() % count;
}

void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
#if defined(WHOLESTORE_HAS_CUDA)
  if (device_count() > 0) {
    cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
    if (err != cudaSuccess)
      WM_FAIL(cuda_error, "cudaMemcpy of " << bytes << " bytes: " << cudaGetErrorString(err));
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace wholememory
