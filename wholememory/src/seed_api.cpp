// The seed-compatible API: global state for the two modes, mapped onto wholememory handles.
// Nothing here allocates by itself; every allocation is a wholememory::allocation.

#include "cuda_memory.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/seed_api.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <string>

namespace whole_memory {

using wholememory::allocation_options;
using wholememory::memory_location;
using wholememory::memory_type;

struct WholeChunkedMemory {
  wholememory::allocation memory;
  WholeChunkedMemoryHandle host_view{};
};

namespace {

thread_local std::string last_error;

// Adapts a seed CollectiveCommunicator (restricted to `members`) to a bootstrap.  Sizes are
// exchanged before data, so disagreeing ranks fail with mismatch_error instead of reading
// garbage.
class seed_bootstrap : public wholememory::bootstrap {
 public:
  seed_bootstrap(std::shared_ptr<CollectiveCommunicator> cc, std::vector<int> members)
      : cc_(std::move(cc)), members_(std::move(members)) {
    auto it = std::find(members_.begin(), members_.end(), cc_->Rank());
    rank_ = static_cast<int>(it - members_.begin());
  }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  std::chrono::milliseconds timeout() const override { return wholememory::default_timeout(); }

  void allgather(const void* send, void* recv, std::size_t bytes) override {
    count_round();
    std::vector<std::uint64_t> sizes(size());
    std::uint64_t mine = bytes;
    all_to_all_same(&mine, sizeof(mine), sizes.data());
    for (int r = 0; r < size(); ++r) {
      if (sizes[r] != bytes) {
        WM_FAIL(wholememory::mismatch_error, "allgather: rank " << rank_ << " passed " << bytes
                                                                << " bytes, rank " << r << " "
                                                                << sizes[r]);
      }
    }
    all_to_all_same(send, bytes, recv);
  }
  void barrier() override {
    count_round();
    cc_->Barrier(ranks_arg(), static_cast<int>(members_.size()));
  }

  std::unique_ptr<bootstrap> split(int color, int key) override {
    int mine[3] = {color, key, members_[rank_]};
    std::vector<int> all(3 * size());
    allgather(mine, all.data(), sizeof(mine));
    if (color < 0) return nullptr;
    std::vector<std::pair<int, int>> group;  // (key, global rank)
    for (int r = 0; r < size(); ++r)
      if (all[3 * r] == color) group.emplace_back(all[3 * r + 1], all[3 * r + 2]);
    std::sort(group.begin(), group.end());
    std::vector<int> members;
    for (auto& g : group) members.push_back(g.second);
    return std::make_unique<seed_bootstrap>(cc_, members);
  }
  std::unique_ptr<bootstrap> subset(const std::vector<int>& members) override {
    std::vector<int> global;
    for (int m : members) global.push_back(members_.at(m));
    return std::make_unique<seed_bootstrap>(cc_, global);
  }

 private:
  const int* ranks_arg() const { return members_.data(); }
  void all_to_all_same(const void* send, std::size_t bytes, void* recv) {
    WM_EXPECTS(bytes <= static_cast<std::size_t>(INT32_MAX),
               "the seed communicator moves at most 2 GiB per call, asked for " << bytes);
    std::vector<char> out(bytes * size());
    for (int r = 0; r < size(); ++r) std::memcpy(out.data() + r * bytes, send, bytes);
    cc_->AllToAll(out.data(), static_cast<int>(bytes), recv, static_cast<int>(bytes), ranks_arg(),
                  static_cast<int>(members_.size()));
  }

  std::shared_ptr<CollectiveCommunicator> cc_;
  std::vector<int> members_;
  int rank_ = 0;
};

struct state {
  std::mutex mutex;
  bool initialized = false;
  // Single-process mode: allocations by address.
  std::map<void*, wholememory::allocation> wmsp;
  std::shared_ptr<wholememory::communicator> wmsp_comm;
  // Multi-process mode.
  std::shared_ptr<wholememory::communicator> wmmp_comm;
  std::map<std::vector<int>, std::shared_ptr<wholememory::communicator>> groups;
  // Allocation sequence -> allocation, so that finalization frees in allocation order, which
  // is the same on every rank (address order is not, and frees are collective).
  std::uint64_t next_seq = 0;
  std::map<std::uint64_t, wholememory::allocation> wmmp;
  std::map<void*, std::uint64_t> wmmp_by_ptr;
  std::map<std::uint64_t, std::unique_ptr<WholeChunkedMemory>> wcmmp;
  std::map<WholeChunkedMemory*, std::uint64_t> wcmmp_by_handle;
};

state& global() {
  static state s;
  return s;
}

struct not_initialized : wholememory::logic_error {
  using logic_error::logic_error;
};

template <typename F>
WmStatus guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return WM_SUCCESS;
  } catch (const not_initialized& e) {
    last_error = e.what();
    return WM_ERROR_NOT_INITIALIZED;
  } catch (const wholememory::mismatch_error& e) {
    last_error = e.what();
    return WM_ERROR_MISMATCH;
  } catch (const wholememory::logic_error& e) {
    last_error = e.what();
    return WM_ERROR_INVALID_ARGUMENT;
  } catch (const wholememory::out_of_memory& e) {
    last_error = e.what();
    return WM_ERROR_OUT_OF_MEMORY;
  } catch (const wholememory::cuda_error& e) {
    last_error = e.what();
    return WM_ERROR_CUDA;
  } catch (const wholememory::nccl_error& e) {
    last_error = e.what();
    return WM_ERROR_NCCL;
  } catch (const wholememory::system_error& e) {
    last_error = e.what();
    return WM_ERROR_SYSTEM;
  } catch (const wholememory::timeout_error& e) {
    last_error = e.what();
    return WM_ERROR_TIMEOUT;
  } catch (const std::bad_alloc& e) {
    last_error = e.what();
    return WM_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    last_error = e.what();
    return WM_ERROR_UNKNOWN;
  } catch (...) {
    last_error = "unknown exception";
    return WM_ERROR_UNKNOWN;
  }
}

void require_init(const state& s) {
  if (!s.initialized) throw not_initialized("WholeMemoryInit has not been called");
}

void require_wmmp(const state& s) {
  require_init(s);
  if (!s.wmmp_comm) throw not_initialized("WmmpInit has not been called");
}

// The communicator for a seed `ranks` list: the whole group, or a cached subgroup.
std::shared_ptr<wholememory::communicator> group_for(state& s, const int* ranks, int rank_count) {
  if (ranks == nullptr || rank_count == 0) return s.wmmp_comm;
  WM_EXPECTS(rank_count > 0, "rank_count " << rank_count << " is negative");
  std::vector<int> members(ranks, ranks + rank_count);
  std::sort(members.begin(), members.end());
  WM_EXPECTS(std::adjacent_find(members.begin(), members.end()) == members.end(),
             "the ranks list names a rank twice");
  WM_EXPECTS(members.front() >= 0 && members.back() < s.wmmp_comm->size(),
             "the ranks list holds rank "
                 << (members.front() < 0 ? members.front() : members.back()) << ", outside [0, "
                 << s.wmmp_comm->size() << ")");
  const int me = s.wmmp_comm->rank();
  WM_EXPECTS(std::binary_search(members.begin(), members.end(), me),
             "rank " << me << " called with a ranks list that does not contain it");
  if (static_cast<int>(members.size()) == s.wmmp_comm->size()) return s.wmmp_comm;
  auto it = s.groups.find(members);
  if (it != s.groups.end()) return it->second;
  std::shared_ptr<wholememory::bootstrap> sub(s.wmmp_comm->get_bootstrap().subset(members));
  auto comm = wholememory::make_host_communicator(sub);
  s.groups.emplace(members, comm);
  return comm;
}

// Frees every multi-process allocation in allocation order.  Keeps going after a failure and
// rethrows the first one.
void free_all_wmmp(state& s) {
  std::vector<std::pair<std::uint64_t, bool>> order;  // (seq, chunked)
  for (auto& a : s.wmmp) order.emplace_back(a.first, false);
  for (auto& a : s.wcmmp) order.emplace_back(a.first, true);
  std::sort(order.begin(), order.end());
  std::exception_ptr first;
  for (auto [seq, chunked] : order) {
    try {
      if (chunked) {
        s.wcmmp.at(seq)->memory.free();
      } else {
        s.wmmp.at(seq).free();
      }
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  s.wcmmp.clear();
  s.wcmmp_by_handle.clear();
  s.wmmp.clear();
  s.wmmp_by_ptr.clear();
  if (first) std::rethrow_exception(first);
}

void* checked_out(void** ptr) {
  WM_EXPECTS(ptr != nullptr, "the output pointer is null");
  *ptr = nullptr;
  return ptr;
}

std::size_t chunk_granularity(std::size_t min_granularity) {
  std::size_t g = min_granularity == 0 ? 1 : min_granularity;
  return std::lcm(g, std::size_t{16});
}

}  // namespace

const char* WmStatusName(WmStatus status) {
  switch (status) {
    case WM_SUCCESS:
      return "WM_SUCCESS";
    case WM_ERROR_INVALID_ARGUMENT:
      return "WM_ERROR_INVALID_ARGUMENT";
    case WM_ERROR_MISMATCH:
      return "WM_ERROR_MISMATCH";
    case WM_ERROR_NOT_INITIALIZED:
      return "WM_ERROR_NOT_INITIALIZED";
    case WM_ERROR_CUDA:
      return "WM_ERROR_CUDA";
    case WM_ERROR_NCCL:
      return "WM_ERROR_NCCL";
    case WM_ERROR_SYSTEM:
      return "WM_ERROR_SYSTEM";
    case WM_ERROR_OUT_OF_MEMORY:
      return "WM_ERROR_OUT_OF_MEMORY";
    case WM_ERROR_TIMEOUT:
      return "WM_ERROR_TIMEOUT";
    case WM_ERROR_UNKNOWN:
      return "WM_ERROR_UNKNOWN";
  }
  return "WM_ERROR_UNKNOWN";
}

const char* WmLastErrorMessage() { return last_error.c_str(); }

WmStatus WholeMemoryInit() {
  return guarded([] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.initialized) throw not_initialized("WholeMemoryInit was already called");
    s.initialized = true;
  });
}

WmStatus WholeMemoryFinalize() {
  return guarded([] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    require_init(s);
    std::exception_ptr first;
    try {
      if (s.wmmp_comm) free_all_wmmp(s);
    } catch (...) {
      first = std::current_exception();
    }
    s.groups.clear();
    s.wmmp_comm.reset();
    s.wmsp.clear();
    s.wmsp_comm.reset();
    s.initialized = false;
    if (first) std::rethrow_exception(first);
  });
}

// ---- Single process ------------------------------------------------------------------------

namespace {
std::shared_ptr<wholememory::communicator> wmsp_comm(state& s) {
  if (!s.wmsp_comm) {
    std::shared_ptr<wholememory::bootstrap> bs(
        std::move(wholememory::make_thread_bootstraps(1).front()));
    s.wmsp_comm = wholememory::make_host_communicator(bs);
  }
  return s.wmsp_comm;
}

void wmsp_malloc(void** ptr, std::size_t size, memory_location location, std::vector<int> devices) {
  state& s = global();
  std::lock_guard<std::mutex> lock(s.mutex);
  checked_out(ptr);
  require_init(s);
  WM_EXPECTS(size > 0, "cannot allocate 0 bytes");
  allocation_options opts;
  opts.devices = std::move(devices);
  auto wm =
      wholememory::allocation::create(wmsp_comm(s), size, memory_type::continuous, location, opts);
  void* p = wm.data();
  s.wmsp.emplace(p, std::move(wm));
  *ptr = p;
}
}  // namespace

WmStatus WmspMalloc(void** ptr, std::size_t size, const int* dev_list, int dev_count) {
  return guarded([&] {
    std::vector<int> devices;
    if (dev_list != nullptr && dev_count > 0) {
      devices.assign(dev_list, dev_list + dev_count);
    } else {
      // All visible GPUs, as the seed does when no list is given.
      int count = wholememory::device_count();
      WM_EXPECTS(count > 0, "WmspMalloc needs a CUDA device; none is visible");
      for (int d = 0; d < count; ++d) devices.push_back(d);
    }
    wmsp_malloc(ptr, size, memory_location::device, devices);
  });
}

WmStatus WmspMallocHost(void** ptr, std::size_t size) {
  return guarded([&] { wmsp_malloc(ptr, size, memory_location::host, {}); });
}

WmStatus WmspFree(void* ptr) {
  return guarded([&] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    require_init(s);
    auto it = s.wmsp.find(ptr);
    WM_EXPECTS(it != s.wmsp.end(), "WmspFree: " << ptr << " was not returned by WmspMalloc");
    wholememory::allocation wm = std::move(it->second);
    s.wmsp.erase(it);
    wm.free();
  });
}

// ---- One process per GPU -------------------------------------------------------------------

WmStatus WmmpInit(int group_rank, int group_size, CollectiveCommunicator* collective_communicator) {
  // Ownership passes to us whatever happens, as in the seed.
  std::shared_ptr<CollectiveCommunicator> cc(collective_communicator);
  return guarded([&] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    require_init(s);
    if (s.wmmp_comm) throw not_initialized("WmmpInit was already called");
    WM_EXPECTS(group_size >= 1 && group_rank >= 0 && group_rank < group_size,
               "rank " << group_rank << " outside a group of " << group_size);
    std::shared_ptr<wholememory::bootstrap> bs;
    if (cc) {
      cc->SetRankAndSize(group_rank, group_size);
      std::vector<int> all(group_size);
      std::iota(all.begin(), all.end(), 0);
      bs = std::make_shared<seed_bootstrap>(cc, all);
    } else {
      // The caller gives rank and size; only the meeting point comes from the environment.
      auto [addr, port] = wholememory::master_address_from_env();
      std::string token = wholememory::job_token_from_env();
      if (token.empty()) {
        token = wholememory::launcher_job_token(std::getenv("RANK") != nullptr ||
                                                std::getenv("WORLD_SIZE") != nullptr);
      }
      bs = wholememory::make_tcp_bootstrap(group_rank, group_size, addr, port,
                                           wholememory::default_timeout(), token);
    }
    s.wmmp_comm = wholememory::make_host_communicator(bs);
  });
}

WmStatus WmmpFinalize() {
  return guarded([] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    require_wmmp(s);
    std::exception_ptr first;
    try {
      free_all_wmmp(s);
    } catch (...) {
      first = std::current_exception();
    }
    s.groups.clear();
    s.wmmp_comm.reset();
    if (first) std::rethrow_exception(first);
  });
}

namespace {
void wmmp_malloc(void** ptr, std::size_t size, memory_location location, const int* ranks,
                 int rank_count) {
  state& s = global();
  std::lock_guard<std::mutex> lock(s.mutex);
  checked_out(ptr);
  require_wmmp(s);
  auto comm = group_for(s, ranks, rank_count);
  auto wm = wholememory::allocation::create(comm, size, memory_type::continuous, location);
  void* p = wm.data();
  std::uint64_t seq = s.next_seq++;
  // Zero-byte allocations have no address; they still pair up with the other ranks' frees.
  if (p != nullptr) s.wmmp_by_ptr.emplace(p, seq);
  s.wmmp.emplace(seq, std::move(wm));
  *ptr = p;
}
}  // namespace

WmStatus WmmpMalloc(void** ptr, std::size_t size, const int* ranks, int rank_count) {
  return guarded([&] { wmmp_malloc(ptr, size, memory_location::device, ranks, rank_count); });
}

WmStatus WmmpMallocHost(void** ptr, std::size_t size, const int* ranks, int rank_count) {
  return guarded([&] { wmmp_malloc(ptr, size, memory_location::host, ranks, rank_count); });
}

WmStatus WmmpFree(void* ptr) {
  return guarded([&] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    require_wmmp(s);
    auto it = s.wmmp_by_ptr.find(ptr);
    WM_EXPECTS(it != s.wmmp_by_ptr.end(),
               "WmmpFree: " << ptr << " was not returned by WmmpMalloc or WmmpMallocHost");
    wholememory::allocation wm = std::move(s.wmmp.at(it->second));
    s.wmmp.erase(it->second);
    s.wmmp_by_ptr.erase(it);
    wm.free();
  });
}

bool WmmpCanAccessFrom(void* ptr, int dev) {
  state& s = global();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.wmmp_by_ptr.find(ptr);
  if (it == s.wmmp_by_ptr.end()) return false;
  const auto& wm = s.wmmp.at(it->second);
  if (wm.location() == memory_location::host) return true;  // registered with every GPU
  if (dev < 0) return false;
  try {
    return dev == wholememory::detail::current_device();
  } catch (...) {
    return false;
  }
}

WmStatus WmmpBarrier(const int* ranks, int rank_count) {
  return guarded([&] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    require_wmmp(s);
    group_for(s, ranks, rank_count)->barrier(nullptr);
  });
}

namespace {
void wcmmp_malloc(WholeChunkedMemory_t* pwcmt, std::size_t size, std::size_t min_granularity,
                  memory_location location, const int* ranks, int rank_count) {
  state& s = global();
  std::lock_guard<std::mutex> lock(s.mutex);
  WM_EXPECTS(pwcmt != nullptr, "the output handle pointer is null");
  *pwcmt = nullptr;
  require_wmmp(s);
  auto comm = group_for(s, ranks, rank_count);
  allocation_options opts;
  opts.granularity = chunk_granularity(min_granularity);
  auto h = std::make_unique<WholeChunkedMemory>();
  h->memory = wholememory::allocation::create(comm, size, memory_type::chunked, location, opts);
  h->host_view = h->memory.host_view();
  WholeChunkedMemory* raw = h.get();
  std::uint64_t seq = s.next_seq++;
  s.wcmmp.emplace(seq, std::move(h));
  s.wcmmp_by_handle.emplace(raw, seq);
  *pwcmt = raw;
}
}  // namespace

WmStatus WcmmpMalloc(WholeChunkedMemory_t* pwcmt, std::size_t size, std::size_t min_granularity,
                     const int* ranks, int rank_count) {
  return guarded([&] {
    wcmmp_malloc(pwcmt, size, min_granularity, memory_location::device, ranks, rank_count);
  });
}

WmStatus WcmmpMallocHost(WholeChunkedMemory_t* pwcmt, std::size_t size, std::size_t min_granularity,
                         const int* ranks, int rank_count) {
  return guarded([&] {
    wcmmp_malloc(pwcmt, size, min_granularity, memory_location::host, ranks, rank_count);
  });
}

WmStatus WcmmpFree(WholeChunkedMemory_t wcmt) {
  return guarded([&] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    require_wmmp(s);
    auto it = s.wcmmp_by_handle.find(wcmt);
    WM_EXPECTS(it != s.wcmmp_by_handle.end(), "WcmmpFree: unknown handle " << wcmt);
    std::unique_ptr<WholeChunkedMemory> h = std::move(s.wcmmp.at(it->second));
    s.wcmmp.erase(it->second);
    s.wcmmp_by_handle.erase(it);
    h->memory.free();
  });
}

WholeChunkedMemoryHandle* GetDeviceChunkedHandle(WholeChunkedMemory_t wcmt, int dev_id) {
  WholeChunkedMemoryHandle* result = nullptr;
  guarded([&] {
    state& s = global();
    std::lock_guard<std::mutex> lock(s.mutex);
    WM_EXPECTS(s.wcmmp_by_handle.count(wcmt) == 1, "unknown WholeChunkedMemory handle " << wcmt);
    if (dev_id < 0) {
      result = &wcmt->host_view;
    } else {
      result = const_cast<WholeChunkedMemoryHandle*>(wcmt->memory.device_view(dev_id));
    }
  });
  return result;
}

}  // namespace whole_memory
