#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/host_identity.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

namespace wholememory {

bool rank_topology::single_process() const {
  if (num_hosts != 1) return false;
  const long self = static_cast<long>(::getpid());
  return std::all_of(pids.begin(), pids.end(), [self](long pid) { return pid == self; });
}

const char* backend_name(backend b) {
  switch (b) {
    case backend::host:
      return "host";
    case backend::nccl:
      return "nccl";
  }
  return "unknown";
}

std::string host_identity() {
  if (const char* id = std::getenv("WHOLESTORE_HOST_ID")) {
    const std::string value(id);
    WM_EXPECTS(
        !value.empty() && value.size() <= max_host_identity,
        "WHOLESTORE_HOST_ID must be 1 to " << max_host_identity << " bytes, not " << value.size());
    for (unsigned char c : value) {
      WM_EXPECTS(c >= 0x20 && c != 0x7f, "WHOLESTORE_HOST_ID holds a control character (byte "
                                             << static_cast<int>(c) << ")");
    }
    return value;
  }
  char host[HOST_NAME_MAX + 1] = {};
  WM_SYSCALL_TRY(::gethostname(host, sizeof(host) - 1));
  return host;
}

rank_topology discover_topology(bootstrap& bs) {
  // "pid host": the pid first so that any host name, spaces included, parses back.
  const std::string mine = std::to_string(static_cast<long>(::getpid())) + " " + host_identity();
  const std::vector<std::string> all = bs.allgatherv(mine);

  rank_topology topo;
  const int size = static_cast<int>(all.size());
  WM_EXPECTS(size == bs.size(),
             "allgatherv returned " << size << " entries for " << bs.size() << " ranks");
  std::vector<std::string> hosts;
  topo.pids.resize(size);
  topo.host_of_rank.resize(size);
  for (int r = 0; r < size; ++r) {
    const std::string& entry = all[r];
    const std::size_t space = entry.find(' ');
    WM_EXPECTS(space != std::string::npos && space > 0,
               "malformed topology entry '" << entry << "' from rank " << r);
    topo.pids[r] = std::stol(entry.substr(0, space));
    const std::string name = entry.substr(space + 1);
    // Host indices follow first appearance so that every rank derives the same numbering.
    auto it = std::find(hosts.begin(), hosts.end(), name);
    if (it == hosts.end()) it = hosts.insert(hosts.end(), name);
    topo.host_of_rank[r] = static_cast<int>(it - hosts.begin());
  }
  topo.num_hosts = static_cast<int>(hosts.size());
  const int my_host = topo.host_of_rank[bs.rank()];
  for (int r = 0; r < size; ++r) {
    if (topo.host_of_rank[r] != my_host) continue;
    if (r == bs.rank()) topo.local_rank = static_cast<int>(topo.local_ranks.size());
    topo.local_ranks.push_back(r);
  }
  topo.local_size = static_cast<int>(topo.local_ranks.size());
  return topo;
}

std::shared_ptr<communicator> make_local_host_communicator(std::shared_ptr<bootstrap> bs) {
  WM_EXPECTS(bs != nullptr, "make_local_host_communicator needs a bootstrap");
  const rank_topology topo = discover_topology(*bs);
  if (topo.num_hosts == 1) return make_host_communicator(std::move(bs));
  const int me = bs->rank();
  return make_host_communicator(std::shared_ptr<bootstrap>(bs->split(topo.host_of_rank[me], me)));
}

std::shared_ptr<communicator> communicator::split_by_host() {
  return split(topology_.host_of_rank[rank()], rank());
}

}  // namespace wholememory
