// WholeMemory handles: argument agreement across ranks, the partition, host segments, and the
// hand-off to the CUDA module for device memory.
#include "allocation_access.hpp"
#include "cuda_memory.hpp"
#include "fd_exchange.hpp"
#include "posix.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>
#include <wholememory/log.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iomanip>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>

namespace wholememory {

const char* memory_type_name(memory_type t) {
  switch (t) {
    case memory_type::continuous:
      return "continuous";
    case memory_type::chunked:
      return "chunked";
    case memory_type::distributed:
      return "distributed";
  }
  return "unknown";
}

const char* memory_location_name(memory_location l) {
  return l == memory_location::device ? "device" : "host";
}

memory_type parse_memory_type(const std::string& name) {
  for (memory_type t : {memory_type::continuous, memory_type::chunked, memory_type::distributed})
    if (name == memory_type_name(t)) return t;
  WM_FAIL(logic_error,
          "unknown memory type '" << name << "'; expected continuous, chunked or distributed");
}

memory_location parse_memory_location(const std::string& name) {
  if (name == "device") return memory_location::device;
  if (name == "host") return memory_location::host;
  WM_FAIL(logic_error, "unknown memory location '" << name << "'; expected device or host");
}

namespace detail {

class memory_impl {
 public:
  std::shared_ptr<communicator> comm;
  memory_type type = memory_type::continuous;
  memory_location location = memory_location::host;
  partition parts;
  bool single_process = false;  // one rank owning one part per listed GPU
  std::vector<part_info> infos;
  void* base = nullptr;

  // Owners, released in reverse order of acquisition by release().
  std::vector<mapping> host_mappings;
  std::vector<std::unique_ptr<resource>> host_registrations;
  std::unique_ptr<resource> device_memory;
  mutable std::mutex views_mutex;
  mutable std::map<int, std::pair<std::unique_ptr<resource>, const chunked_view*>> device_views;
  /// State a module keeps with this allocation (allocation_access.hpp): released first.
  std::shared_ptr<void> exchange_state, host_exchange_state;

  void release() {
    exchange_state.reset();
    host_exchange_state.reset();
    device_views.clear();
    host_registrations.clear();
    host_mappings.clear();
    device_memory.reset();
  }
};

namespace {

// What every rank must agree on before anything is allocated.
struct create_descriptor {
  std::uint64_t total_bytes;
  std::uint64_t granularity;
  std::uint64_t part_bytes_hash;
  std::int32_t part_bytes_count;
  std::int32_t device_count;
  std::int32_t type;
  std::int32_t location;
  std::int32_t valid;  // 0 when this rank's own arguments were rejected
  char error[200];     // why, when valid == 0
};

std::uint64_t hash_sizes(const std::vector<std::size_t>& sizes) {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a over the values
  for (std::size_t s : sizes) {
    for (int b = 0; b < 8; ++b) {
      h ^= (static_cast<std::uint64_t>(s) >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

void check_local_arguments(const communicator& comm, std::size_t total_bytes, memory_type type,
                           memory_location location, const allocation_options& options) {
  WM_EXPECTS(options.granularity >= 1, "granularity must be at least 1 byte");
  if (!options.devices.empty()) {
    WM_EXPECTS(comm.size() == 1,
               "a device list (single-process multi-GPU mode) needs a "
               "communicator of one rank, this one has "
                   << comm.size());
    WM_EXPECTS(location == memory_location::device,
               "a device list only applies to device memory, not host memory");
    WM_EXPECTS(type != memory_type::distributed,
               "distributed memory needs one rank per part; a device list places several parts "
               "in one process (use continuous or chunked)");
  }
  int parts = options.devices.empty() ? comm.size() : static_cast<int>(options.devices.size());
  WM_EXPECTS(parts <= max_view_parts || type == memory_type::distributed,
             parts << " parts exceed the " << max_view_parts
                   << " a continuous or chunked allocation can map");
  if (!options.part_bytes.empty()) {
    WM_EXPECTS(
        static_cast<int>(options.part_bytes.size()) == parts,
        "part_bytes has " << options.part_bytes.size() << " entries for " << parts << " parts");
    std::size_t sum =
        std::accumulate(options.part_bytes.begin(), options.part_bytes.end(), std::size_t{0});
    WM_EXPECTS(sum == total_bytes,
               "part_bytes sum to " << sum << " bytes, the allocation has " << total_bytes);
    partition::from_sizes(options.part_bytes, options.granularity);  // checks the multiples
  }
}

// Allgathers the arguments; throws on every rank when one rank rejected its own or when they
// differ, so no rank goes on to allocate alone.
void agree_on_arguments(communicator& comm, std::size_t total_bytes, memory_type type,
                        memory_location location, const allocation_options& options) {
  create_descriptor mine{};
  mine.total_bytes = total_bytes;
  mine.granularity = options.granularity;
  mine.part_bytes_hash = hash_sizes(options.part_bytes);
  mine.part_bytes_count = static_cast<std::int32_t>(options.part_bytes.size());
  mine.device_count = static_cast<std::int32_t>(options.devices.size());
  mine.type = static_cast<std::int32_t>(type);
  mine.location = static_cast<std::int32_t>(location);
  mine.valid = 1;
  std::string own_error;
  try {
    check_local_arguments(comm, total_bytes, type, location, options);
  } catch (const logic_error& e) {
    own_error = e.what();
    mine.valid = 0;
    std::snprintf(mine.error, sizeof(mine.error), "%s", e.what());
  }
  std::vector<create_descriptor> all(comm.size());
  comm.get_bootstrap().allgather(&mine, all.data(), sizeof(mine));

  if (!own_error.empty()) throw logic_error(own_error);
  for (int r = 0; r < comm.size(); ++r) {
    if (!all[r].valid) {
      WM_FAIL(logic_error, "wholememory::create: rank "
                               << r << " rejected its arguments: " << std::string(all[r].error));
    }
  }
  auto name_type = [](std::int32_t t) { return memory_type_name(static_cast<memory_type>(t)); };
  auto name_loc = [](std::int32_t l) {
    return memory_location_name(static_cast<memory_location>(l));
  };
  for (int r = 1; r < comm.size(); ++r) {
    const create_descriptor& a = all[0];
    const create_descriptor& b = all[r];
    if (a.total_bytes != b.total_bytes)
      WM_FAIL(mismatch_error, "wholememory::create: rank 0 asked for "
                                  << a.total_bytes << " bytes, rank " << r << " for "
                                  << b.total_bytes);
    if (a.type != b.type)
      WM_FAIL(mismatch_error, "wholememory::create: rank 0 asked for "
                                  << name_type(a.type) << " memory, rank " << r << " for "
                                  << name_type(b.type));
    if (a.location != b.location)
      WM_FAIL(mismatch_error, "wholememory::create: rank 0 asked for "
                                  << name_loc(a.location) << " memory, rank " << r << " for "
                                  << name_loc(b.location));
    if (a.granularity != b.granularity)
      WM_FAIL(mismatch_error, "wholememory::create: rank 0 passed granularity "
                                  << a.granularity << ", rank " << r << " " << b.granularity);
    if (a.part_bytes_count != b.part_bytes_count || a.part_bytes_hash != b.part_bytes_hash)
      WM_FAIL(mismatch_error,
              "wholememory::create: ranks 0 and " << r << " passed different part_bytes lists");
  }
}

// Writes one byte per page of [ptr, ptr + bytes) so the pages are allocated by the rank that
// owns them (first touch), in parallel across ranks, before registration pins them.
void touch_pages(void* ptr, std::size_t bytes) {
  if (bytes == 0) return;
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  volatile char* p = static_cast<volatile char*>(ptr);
  for (std::size_t off = 0; off < bytes; off += page) p[off] = 0;
}

/// Host memory is shared memory (memfd) whose pages are touched right away: more than the
/// host has would end in the kernel's out-of-memory killer, not in an error.  So local rank 0
/// compares this host's share of the allocation with what the host has free, and every rank
/// hears the verdict (an out_of_memory naming both sizes).  Collective.
void check_host_capacity(const memory_impl& m) {
  communicator& comm = *m.comm;
  const rank_topology& topo = comm.topology();
  std::size_t here = 0;
  if (m.type == memory_type::distributed) {
    for (int r : topo.local_ranks) here += m.parts.part_bytes(r);
  } else {
    here = m.parts.total_bytes;  // one host holds it all (checked by create)
  }
  agree(comm.get_bootstrap(), "wholememory::create", "checking the host's free memory", [&] {
    if (topo.local_rank != 0 || here == 0) return std::string();
    const std::size_t available = available_host_bytes();
    if (available != 0 && here > available) {
      WM_FAIL(out_of_memory, "this host has "
                                 << available / 1048576 << " MiB of memory available "
                                 << "(MemAvailable, or the cgroup's limit), and its share of the "
                                    "allocation is "
                                 << here / 1048576
                                 << " MiB; use smaller sizes, more hosts, or "
                                    "device memory");
    }
    return std::string();
  });
}

void allocate_host(memory_impl& m) {
  communicator& comm = *m.comm;
  const rank_topology& topo = comm.topology();
  const partition& parts = m.parts;
  const int me = comm.rank();
  const std::size_t my_offset = parts.part_offset(me);
  const std::size_t my_bytes = parts.part_bytes(me);
  check_host_capacity(m);

  switch (m.type) {
    case memory_type::continuous: {
      // One segment made by local rank 0 and mapped by every local rank.
      unique_fd own;
      if (topo.local_rank == 0) own = create_shared_memory("wholememory", parts.total_bytes);
      auto fds = allgather_local_fds(comm.get_bootstrap(), topo, own.get());
      WM_EXPECTS(fds[0].valid(), "local rank 0 shared no segment");
      m.host_mappings.push_back(map_shared(fds[0].get(), parts.total_bytes));
      m.base = m.host_mappings.back().get();
      touch_pages(static_cast<char*>(m.base) + my_offset, my_bytes);
      comm.get_bootstrap().barrier();
      m.host_registrations.push_back(register_host_memory(m.base, parts.total_bytes));
      for (int i = 0; i < parts.num_parts(); ++i)
        m.infos[i].ptr =
            parts.total_bytes ? static_cast<char*>(m.base) + parts.part_offset(i) : nullptr;
      break;
    }
    case memory_type::chunked: {
      // One segment per rank, every local rank maps all of them.
      unique_fd own = create_shared_memory("wholememory-part", my_bytes);
      auto fds = allgather_local_fds(comm.get_bootstrap(), topo, own.get());
      for (int l = 0; l < topo.local_size; ++l) {
        int r = topo.local_ranks[l];
        m.host_mappings.push_back(map_shared(fds[l].get(), parts.part_bytes(r)));
        m.infos[r].ptr = m.host_mappings.back().get();
      }
      touch_pages(m.infos[me].ptr, my_bytes);
      comm.get_bootstrap().barrier();
      for (int l = 0; l < topo.local_size; ++l) {
        int r = topo.local_ranks[l];
        m.host_registrations.push_back(register_host_memory(m.infos[r].ptr, parts.part_bytes(r)));
      }
      break;
    }
    case memory_type::distributed: {
      // Each rank maps only its own part; a memfd keeps it shareable later without a copy.
      unique_fd own = create_shared_memory("wholememory-part", my_bytes);
      m.host_mappings.push_back(map_shared(own.get(), my_bytes));
      m.infos[me].ptr = m.host_mappings.back().get();
      touch_pages(m.infos[me].ptr, my_bytes);
      m.host_registrations.push_back(register_host_memory(m.infos[me].ptr, my_bytes));
      break;
    }
  }
}

void allocate_on_device(memory_impl& m, const allocation_options& options) {
  device_allocation a;
  if (m.single_process) {
    a = allocate_device_single_process(m.parts, m.type, options.devices);
  } else {
    a = allocate_device(m.comm->get_bootstrap(), m.comm->topology(), m.parts, m.type,
                        current_device());
  }
  WM_EXPECTS(
      static_cast<int>(a.part_ptrs.size()) == m.parts.num_parts(),
      "device allocation returned " << a.part_ptrs.size() << " parts for " << m.parts.num_parts());
  m.device_memory = std::move(a.owner);
  m.base = a.base;
  for (int i = 0; i < m.parts.num_parts(); ++i) {
    m.infos[i].ptr = a.part_ptrs[i];
    m.infos[i].device = i < static_cast<int>(a.part_devices.size()) ? a.part_devices[i] : -1;
  }
}

chunked_view make_view(const memory_impl& m) {
  WM_EXPECTS(m.type != memory_type::distributed,
             "distributed memory has no view of the other ranks' parts; gather through the "
             "communicator instead");
  chunked_view v{};
  if (m.type == memory_type::continuous) {
    v.num_parts = 1;
    v.parts[0] = m.base;
    v.offsets[0] = 0;
    v.offsets[1] = m.parts.total_bytes;
    v.uniform_part_bytes = 0;
    return v;
  }
  const int n = m.parts.num_parts();
  v.num_parts = n;
  for (int i = 0; i < n; ++i) {
    v.parts[i] = m.infos[i].ptr;
    v.offsets[i] = m.parts.part_offset(i);
  }
  v.offsets[n] = m.parts.total_bytes;
  std::size_t first = m.parts.part_bytes(0);
  bool uniform = first != 0;
  for (int i = 1; i + 1 < n && uniform; ++i) uniform = m.parts.part_bytes(i) == first;
  v.uniform_part_bytes = uniform ? first : 0;
  return v;
}

}  // namespace
}  // namespace detail

allocation allocation::create(std::shared_ptr<communicator> comm, std::size_t total_bytes,
                              memory_type type, memory_location location,
                              const allocation_options& options) {
  WM_EXPECTS(comm != nullptr, "wholememory::create needs a communicator");
  detail::agree_on_arguments(*comm, total_bytes, type, location, options);

  const rank_topology& topo = comm->topology();
  if (type != memory_type::distributed && topo.num_hosts > 1) {
    WM_FAIL(logic_error, memory_type_name(type)
                             << " memory needs every rank on one host, the communicator spans "
                             << topo.num_hosts
                             << " hosts; split it by host (one replica per host) or use "
                                "distributed memory");
  }

  auto m = std::make_unique<detail::memory_impl>();
  m->comm = comm;
  m->type = type;
  m->location = location;
  m->single_process = !options.devices.empty();
  const int num_parts = m->single_process ? static_cast<int>(options.devices.size()) : comm->size();
  m->parts = options.part_bytes.empty()
                 ? partition::even(total_bytes, num_parts, options.granularity)
                 : partition::from_sizes(options.part_bytes, options.granularity);
  m->infos.resize(num_parts);
  for (int i = 0; i < num_parts; ++i) {
    m->infos[i].offset = m->parts.part_offset(i);
    m->infos[i].bytes = m->parts.part_bytes(i);
    m->infos[i].rank = m->single_process ? 0 : i;
  }

  // A failed allocation names what it was for first (the layer below names the piece, the
  // size and the device); the exception keeps its type.
  auto context = [&] {
    std::ostringstream os;
    os << std::fixed << std::setprecision(2);
    os << (options.name.empty() ? std::string("wholememory::create") : options.name) << ": "
       << static_cast<double>(total_bytes) / (1 << 30) << " GiB (" << total_bytes << " bytes) of "
       << memory_type_name(type) << " " << memory_location_name(location) << " memory over "
       << num_parts << " part(s) could not be allocated: ";
    return os.str();
  };
  try {
    if (location == memory_location::host) {
      detail::allocate_host(*m);
    } else {
      detail::allocate_on_device(*m, options);
    }
  } catch (const out_of_memory& e) {
    throw out_of_memory(context() + e.what());
  } catch (const system_error& e) {
    throw system_error(context() + e.what());
  } catch (const cuda_error& e) {
    throw cuda_error(context() + e.what());
  }
  return allocation(std::move(m));
}

allocation::allocation(std::unique_ptr<detail::memory_impl> impl) : impl_(std::move(impl)) {}
allocation::allocation() noexcept = default;
allocation::allocation(allocation&&) noexcept = default;

allocation& allocation::operator=(allocation&& other) noexcept {
  if (this != &other) {
    // The handle being replaced is freed as in the destructor.
    allocation old(std::move(*this));
    impl_ = std::move(other.impl_);
  }
  return *this;
}

allocation::~allocation() {
  if (!impl_) return;
  try {
    free();
  } catch (const std::exception& e) {
    // free() has released this process's part either way.  While another exception unwinds
    // the stack (the collective that failed first), that one is the error to report.
    if (std::uncaught_exceptions() == 0) {
      WM_LOG(log_level::warn,
             "the other ranks did not free an allocation together with this "
             "one (released here): "
                 << e.what());
    }
  }
}

void allocation::free() {
  if (!impl_) return;
  // Released even when the barrier fails (a peer died): this process's mappings must go.
  struct releaser {
    std::unique_ptr<detail::memory_impl>& impl;
    ~releaser() {
      impl->release();
      impl.reset();
    }
  } release_on_exit{impl_};
  // After a failed collective the peers are gone, stuck or out of step: a barrier could not
  // complete (or would wait out another timeout), so release this process's part alone.
  if (impl_->comm->broken()) return;
  impl_->comm->get_bootstrap().barrier();
}

std::shared_ptr<void>& detail::allocation_access::exchange_state(const allocation& a) {
  WM_EXPECTS(a.impl_ != nullptr, "use of an empty wholememory handle");
  return a.impl_->exchange_state;
}

std::shared_ptr<void>& detail::allocation_access::host_exchange_state(const allocation& a) {
  WM_EXPECTS(a.impl_ != nullptr, "use of an empty wholememory handle");
  return a.impl_->host_exchange_state;
}

namespace {
const detail::memory_impl& checked(const std::unique_ptr<detail::memory_impl>& impl) {
  WM_EXPECTS(impl != nullptr, "use of an empty wholememory handle");
  return *impl;
}
}  // namespace

std::size_t allocation::size() const { return checked(impl_).parts.total_bytes; }
memory_type allocation::type() const { return checked(impl_).type; }
memory_location allocation::location() const { return checked(impl_).location; }
const partition& allocation::get_partition() const { return checked(impl_).parts; }
communicator& allocation::comm() const { return *checked(impl_).comm; }
std::shared_ptr<communicator> allocation::comm_ptr() const { return checked(impl_).comm; }
int allocation::num_parts() const { return checked(impl_).parts.num_parts(); }

part_info allocation::part(int i) const {
  const auto& m = checked(impl_);
  WM_EXPECTS(i >= 0 && i < m.parts.num_parts(),
             "part " << i << " out of range [0, " << m.parts.num_parts() << ")");
  return m.infos[i];
}

part_info allocation::local_part() const {
  const auto& m = checked(impl_);
  WM_EXPECTS(!m.single_process,
             "single-process multi-GPU memory has one part per GPU, all owned by this rank; "
             "use part(i)");
  return m.infos[m.comm->rank()];
}

void* allocation::data() const {
  const auto& m = checked(impl_);
  WM_EXPECTS(m.type == memory_type::continuous,
             "data() needs continuous memory, this allocation is " << memory_type_name(m.type));
  return m.base;
}

chunked_view allocation::host_view() const { return detail::make_view(checked(impl_)); }

const chunked_view* allocation::device_view(int device) const {
  const auto& m = checked(impl_);
  std::lock_guard<std::mutex> lock(m.views_mutex);
  auto it = m.device_views.find(device);
  if (it != m.device_views.end()) return it->second.second;
  chunked_view v = detail::make_view(m);
  const chunked_view* ptr = nullptr;
  auto owner = detail::copy_view_to_device(v, device, &ptr);
  m.device_views.emplace(device, std::make_pair(std::move(owner), ptr));
  return ptr;
}

std::size_t available_host_bytes() {
  std::size_t available = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      unsigned long long kib = 0;
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        available = static_cast<std::size_t>(kib) * 1024;
        break;
      }
    }
    std::fclose(f);
  }
  auto read_number = [](const char* path, unsigned long long& out) {
    std::FILE* f = std::fopen(path, "r");
    if (!f) return false;
    const bool ok = std::fscanf(f, "%llu", &out) == 1;  // "max" (no limit) does not parse
    std::fclose(f);
    return ok;
  };
  unsigned long long limit = 0, used = 0;
  if (read_number("/sys/fs/cgroup/memory.max", limit) &&
      read_number("/sys/fs/cgroup/memory.current", used)) {
    const std::size_t left = limit > used ? static_cast<std::size_t>(limit - used) : 0;
    available = available == 0 ? left : std::min(available, left);
  }
  return available;
}

}  // namespace wholememory
