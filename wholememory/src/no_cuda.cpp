/*
 * The host-only build's side of cuda_memory.hpp and of make_nccl_communicator: no device
 * is ever present, device memory and NCCL are refused with logic_error, and host memory needs
 * no registration.
 */
#include "cuda_memory.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

namespace wholememory {
namespace detail {

namespace {
constexpr const char* no_device_memory =
    "device memory needs a build with CUDA (WHOLESTORE_WITH_CUDA=ON)";
}

bool cuda_device_present() { return false; }

int current_device() { WM_FAIL(logic_error, "wholestore was built without CUDA"); }

device_allocation allocate_device(bootstrap&, const rank_topology&, const partition&, memory_type,
                                  int) {
  WM_FAIL(logic_error, no_device_memory);
}

device_allocation allocate_device_single_process(const partition&, memory_type,
                                                 const std::vector<int>&) {
  WM_FAIL(logic_error, no_device_memory);
}

std::unique_ptr<resource> register_host_memory(void*, std::size_t) { return nullptr; }

std::unique_ptr<resource> allocate_device_buffer(std::size_t, int, void** ptr) {
  if (ptr != nullptr) *ptr = nullptr;
  WM_FAIL(logic_error, no_device_memory);
}

std::unique_ptr<resource> copy_view_to_device(const chunked_view&, int,
                                              const chunked_view** device_ptr) {
  if (device_ptr != nullptr) *device_ptr = nullptr;
  WM_FAIL(logic_error, no_device_memory);
}

}  // namespace detail

std::shared_ptr<communicator> make_nccl_communicator(std::shared_ptr<bootstrap>, int) {
  WM_FAIL(logic_error,
          "the NCCL communicator needs a build with CUDA (WHOLESTORE_WITH_CUDA=ON); use "
          "make_host_communicator");
}

}  // namespace wholememory
