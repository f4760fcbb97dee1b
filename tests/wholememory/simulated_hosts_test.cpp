/*
 * Hosts simulated on one machine ($WHOLESTORE_HOST_ID, set by `wholestore launch --hosts`):
 * the identity's validation, the topology the ranks derive from it, the host communicator's
 * refusal to span hosts (on every rank, naming them), and per-host communicators holding
 * continuous and chunked memory that each host fills and reads on its own (the seed's
 * per-host replicas).  Four forked ranks, two per simulated host.
 */
#include "common/multiprocess.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/host_identity.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

namespace wm = ::wholememory;

class scoped_env {
 public:
  scoped_env(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~scoped_env() {
    if (old_.empty()) {
      ::unsetenv(name_);
    } else {
      ::setenv(name_, old_.c_str(), 1);
    }
  }

 private:
  const char* name_;
  std::string old_;
};

TEST(HostIdentity, TheVariableReplacesTheHostName) {
  char host[HOST_NAME_MAX + 1] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  {
    scoped_env unset("WHOLESTORE_HOST_ID", nullptr);
    EXPECT_EQ(wm::host_identity(), host);
  }
  scoped_env set("WHOLESTORE_HOST_ID", "rack 7/node 3");
  EXPECT_EQ(wm::host_identity(), "rack 7/node 3");
}

TEST(HostIdentity, BadValuesAreRefusedByName) {
  for (const std::string& bad :
       {std::string(), std::string(256, 'x'), std::string("a\tb"), std::string("a\nb")}) {
    scoped_env set("WHOLESTORE_HOST_ID", bad.c_str());
    try {
      wm::host_identity();
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const wm::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("WHOLESTORE_HOST_ID"), std::string::npos) << e.what();
    }
  }
  scoped_env longest("WHOLESTORE_HOST_ID", std::string(255, 'y').c_str());
  EXPECT_EQ(wm::host_identity().size(), 255u);
}

// Ranks 0, 1 on "sim-a" and 2, 3 on "sim-b"; the variable is set before anything asks.
const char* host_of(int rank) { return rank < 2 ? "sim-a" : "sim-b"; }

TEST(SimulatedHosts, TopologyRefusalAndPerHostReplicas) {
  fork_result r = fork_ranks(4, [](std::shared_ptr<wm::bootstrap> bs) {
    const int me = bs->rank();
    ::setenv("WHOLESTORE_HOST_ID", host_of(me), 1);
    const wm::rank_topology topo = wm::discover_topology(*bs);
    EXPECT_EQ(topo.num_hosts, 2);
    EXPECT_EQ(topo.host_of_rank, (std::vector<int>{0, 0, 1, 1}));
    EXPECT_EQ(topo.local_size, 2);
    EXPECT_EQ(topo.local_rank, me % 2);
    EXPECT_EQ(topo.local_ranks, me < 2 ? (std::vector<int>{0, 1}) : (std::vector<int>{2, 3}));
    EXPECT_FALSE(topo.single_process());

    // The host communicator cannot span hosts: every rank refuses, naming both.
    try {
      wm::make_host_communicator(bs);
      ADD_FAILURE() << "a host communicator spanned two hosts";
    } catch (const wm::logic_error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("span 2 hosts"), std::string::npos) << what;
      EXPECT_NE(what.find("sim-a"), std::string::npos) << what;
      EXPECT_NE(what.find("sim-b"), std::string::npos) << what;
    }

    // One host communicator per host (make_local_host_communicator splits by host); its
    // memory is that host's alone.
    auto local = wm::make_local_host_communicator(bs);
    ASSERT_EQ(local->size(), 2);
    EXPECT_EQ(local->rank(), me % 2);
    EXPECT_EQ(local->topology().num_hosts, 1);
    for (wm::memory_type type :
         {wm::memory_type::continuous, wm::memory_type::chunked, wm::memory_type::distributed}) {
      SCOPED_TRACE(wm::memory_type_name(type));
      constexpr std::size_t words = 1000;
      wm::allocation mem =
          wm::allocation::create(local, words * 8, type, wm::memory_location::host);
      // Each rank fills its own part with (host, word): a replica per host.
      const wm::part_info mine = mem.local_part();
      auto* p = static_cast<std::uint64_t*>(mine.ptr);
      for (std::size_t i = 0; i < mine.bytes / 8; ++i)
        p[i] = (static_cast<std::uint64_t>(topo.host_of_rank[me]) << 32) | (mine.offset / 8 + i);
      local->barrier(nullptr);
      bs->barrier();  // both hosts have written: neither replica may show the other's values
      for (int part = 0; part < mem.num_parts(); ++part) {
        const wm::part_info q = mem.part(part);
        if (q.ptr == nullptr) continue;  // distributed: another rank's part
        const auto* w = static_cast<const std::uint64_t*>(q.ptr);
        for (std::size_t i = 0; i < q.bytes / 8; ++i) {
          const std::uint64_t want =
              (static_cast<std::uint64_t>(topo.host_of_rank[me]) << 32) | (q.offset / 8 + i);
          if (w[i] != want) {
            ADD_FAILURE() << "rank " << me << " part " << part << " word " << i << ": " << w[i]
                          << ", want " << want;
            break;
          }
        }
      }
      local->barrier(nullptr);
    }
  });
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.status[i], 0) << "rank " << i;
}

}  // namespace
}  // namespace wholestore_test
