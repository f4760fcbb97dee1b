// Symmetric memory over chunked WholeMemory (symmetric.hpp): the size agreement, the blocks'
// addresses, and the job setup.
#include <wholememory/bootstrap.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/symmetric.hpp>

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>

namespace wholememory {

symmetric_env symmetric_init(int device, std::shared_ptr<communicator> comm) {
  symmetric_env env;
  if (comm) {
    env.comm = std::move(comm);
    env.device = env.comm->get_backend() == backend::nccl ? env.comm->device() : device;
    if (env.device >= 0) set_device(env.device);
    return env;
  }
  std::shared_ptr<bootstrap> bs(make_job_bootstrap());
  std::shared_ptr<communicator> host = make_host_communicator(bs);
  int dev = -1;
  if (device_count() > 0) dev = device >= 0 ? device : default_device(*host);
  if (dev >= 0) set_device(dev);
  // NCCL needs one GPU per rank; ranks sharing a GPU (or without one) keep the host backend,
  // over which symmetric memory of both locations works as well.
  const gpu_sharing sharing = describe_gpu_sharing(*bs, dev);
  const bool every_rank_has_a_gpu =
      sharing.gpus > 0 && sharing.max_ranks_per_gpu == 1 && sharing.gpus == sharing.ranks;
  env.comm = every_rank_has_a_gpu ? make_nccl_communicator(bs, dev) : host;
  env.device = dev;
  return env;
}

symmetric_memory symmetric_memory::allocate(std::shared_ptr<communicator> comm, std::size_t bytes,
                                            memory_location location, bool make_symmetric) {
  WM_EXPECTS(comm != nullptr, "allocate_symmetric: no communicator");
  const int n = comm->size();
  // Every rank publishes (bytes, make_symmetric) and decides from the same table, so all
  // ranks throw together or none does.
  std::uint64_t mine[2] = {bytes, make_symmetric ? 1u : 0u};
  std::vector<std::uint64_t> all(2 * static_cast<std::size_t>(n));
  comm->get_bootstrap().allgather(mine, all.data(), sizeof(mine));
  std::vector<std::size_t> requested(static_cast<std::size_t>(n));
  bool same_size = true, same_flag = true;
  for (int r = 0; r < n; ++r) {
    requested[r] = static_cast<std::size_t>(all[2 * r]);
    same_size = same_size && all[2 * r] == all[0];
    same_flag = same_flag && all[2 * r + 1] == all[1];
  }
  auto sizes = [&] {
    std::ostringstream os;
    for (int r = 0; r < n; ++r) os << (r ? ", " : "") << "rank " << r << ": " << requested[r];
    return os.str();
  };
  if (!same_flag) {
    std::ostringstream os;
    for (int r = 0; r < n; ++r)
      os << (r ? ", " : "") << "rank " << r << ": " << (all[2 * r + 1] ? "true" : "false");
    WM_FAIL(mismatch_error, "allocate_symmetric: the ranks disagree on make_symmetric ("
                                << os.str() << "); every rank passes the same value");
  }
  for (int r = 0; r < n; ++r) {
    WM_EXPECTS(requested[r] > 0, "allocate_symmetric: rank "
                                     << r << " asked for 0 bytes (bytes: " << sizes()
                                     << "); every block needs at least one byte");
  }
  if (!same_size && !all[1]) {
    WM_FAIL(mismatch_error, "allocate_symmetric: the ranks ask for different sizes ("
                                << sizes()
                                << " bytes); pass make_symmetric = true to give every rank "
                                   "the largest");
  }
  const std::size_t block = *std::max_element(requested.begin(), requested.end());
  WM_EXPECTS(block <= SIZE_MAX / static_cast<std::size_t>(n),
             "allocate_symmetric: " << n << " blocks of " << block << " bytes overflow");
  allocation_options options;
  options.part_bytes.assign(static_cast<std::size_t>(n), block);
  symmetric_memory s;
  s.memory_ = allocation::create(std::move(comm), block * static_cast<std::size_t>(n),
                                 memory_type::chunked, location, options);
  s.block_bytes_ = block;
  s.requested_ = std::move(requested);
  return s;
}

void symmetric_memory::free() {
  host_view_.reset();
  memory_.free();
  memory_ = allocation();
  block_bytes_ = 0;
  requested_.clear();
}

int symmetric_memory::ranks() const {
  WM_EXPECTS(memory_, "use of an empty symmetric_memory");
  return memory_.comm().size();
}

int symmetric_memory::rank() const {
  WM_EXPECTS(memory_, "use of an empty symmetric_memory");
  return memory_.comm().rank();
}

std::size_t symmetric_memory::requested_bytes(int rank) const {
  WM_EXPECTS(rank >= 0 && rank < ranks(),
             "symmetric_memory: rank " << rank << " of " << ranks() << " ranks");
  return requested_[static_cast<std::size_t>(rank)];
}

memory_location symmetric_memory::location() const {
  WM_EXPECTS(memory_, "use of an empty symmetric_memory");
  return memory_.location();
}

void* symmetric_memory::block(int rank) const {
  WM_EXPECTS(rank >= 0 && rank < ranks(),
             "symmetric_memory: rank " << rank << " of " << ranks() << " ranks");
  return memory_.part(rank).ptr;
}

const chunked_view* symmetric_memory::view(int device) const {
  WM_EXPECTS(memory_, "use of an empty symmetric_memory");
  if (device >= 0) return memory_.device_view(device);
  if (!host_view_) host_view_ = std::make_unique<chunked_view>(memory_.host_view());
  return host_view_.get();
}

}  // namespace wholememory
