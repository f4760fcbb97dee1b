// The launcher's environment (`wholestore launch`, torchrun, mpirun) read into a job's
// bootstrap (wholememory/bootstrap.hpp: read_launch_env, bootstrap_from_env,
// make_job_bootstrap).  Its own file so that the bootstrap's core (bootstrap.cpp: rounds,
// agreement) and the TCP bootstrap it picks (tcp_bootstrap.cpp) do not include each other
// through it: this file stands on both, nothing stands on it.
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include "bootstrap_rounds.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>

namespace wholememory {

namespace {

// Parses a whole decimal integer; rejects empty strings, trailing text and overflow.
long parse_env_int(const char* name, const char* text, long min_value, long max_value) {
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  WM_EXPECTS(*text != '\0' && end != text && *end == '\0' && errno != ERANGE,
             "environment variable " << name << "='" << text << "' is not an integer");
  WM_EXPECTS(value >= min_value && value <= max_value,
             "environment variable " << name << "=" << value << " is out of range [" << min_value
                                     << ", " << max_value << "]");
  return value;
}

}  // namespace

std::optional<launch_env> read_launch_env() {
  const bool has_torch = std::getenv("RANK") || std::getenv("WORLD_SIZE");
  const bool has_ompi = std::getenv("OMPI_COMM_WORLD_RANK") || std::getenv("OMPI_COMM_WORLD_SIZE");
  if (!has_torch && !has_ompi) return std::nullopt;

  const char* rank_name = has_torch ? "RANK" : "OMPI_COMM_WORLD_RANK";
  const char* size_name = has_torch ? "WORLD_SIZE" : "OMPI_COMM_WORLD_SIZE";
  const char* local_rank_name = has_torch ? "LOCAL_RANK" : "OMPI_COMM_WORLD_LOCAL_RANK";
  const char* local_size_name = has_torch ? "LOCAL_WORLD_SIZE" : "OMPI_COMM_WORLD_LOCAL_SIZE";
  const char* rank_text = std::getenv(rank_name);
  const char* size_text = std::getenv(size_name);
  WM_EXPECTS(rank_text && size_text,
             "launch environment is incomplete: " << (rank_text ? size_name : rank_name)
                                                  << " is not set but "
                                                  << (rank_text ? rank_name : size_name) << " is");

  constexpr long max_ranks = 1 << 24;
  launch_env env;
  env.size = static_cast<int>(parse_env_int(size_name, size_text, 1, max_ranks));
  env.rank = static_cast<int>(parse_env_int(rank_name, rank_text, 0, env.size - 1));
  // Without local variables, assume one host: every rank is local.
  const char* local_size_text = std::getenv(local_size_name);
  env.local_size =
      local_size_text
          ? static_cast<int>(parse_env_int(local_size_name, local_size_text, 1, env.size))
          : env.size;
  const char* local_rank_text = std::getenv(local_rank_name);
  env.local_rank =
      local_rank_text
          ? static_cast<int>(parse_env_int(local_rank_name, local_rank_text, 0, env.local_size - 1))
          : (local_size_text ? env.rank % env.local_size : env.rank);

  std::tie(env.master_addr, env.master_port) = master_address_from_env();
  env.job_token = job_token_from_env();
  if (env.job_token.empty()) env.job_token = launcher_job_token(has_torch);
  return env;
}

namespace {

// A token from a launcher's id of the job: printable characters kept, others replaced, and an
// id too long for a token replaced by its hash (the same on every rank, which is all a token
// needs).
std::string token_from_id(const std::string& launcher, const std::string& id) {
  std::string token = launcher + "-";
  for (char c : id) token += (c > ' ' && c <= '~') ? c : '_';
  if (token.size() > max_job_token_bytes) {
    std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
    for (char c : id) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    char hex[17];
    std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
    token = launcher + "-" + hex;
  }
  return token;
}

}  // namespace

std::string launcher_job_token(bool torch_environment) {
  auto value = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? std::string(v) : std::string();
  };
  if (torch_environment) {
    // torchrun's rendezvous id: the same on every worker of a job; "none" when not given.
    const std::string id = value("TORCHELASTIC_RUN_ID");
    if (!id.empty() && id != "none") return token_from_id("torchrun", id);
    return {};
  }
  // Open MPI: the PMIx namespace (v5) or the job id (v4), the same on every process of a job.
  for (const char* name : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"}) {
    const std::string id = value(name);
    if (!id.empty()) return token_from_id("mpirun", id);
  }
  return {};
}

std::string job_token_from_env() {
  const char* token = std::getenv("WHOLESTORE_JOB_TOKEN");
  if (token == nullptr) return {};
  if (*token == '\0') {
    WM_FAIL(logic_error,
            "environment variable WHOLESTORE_JOB_TOKEN is set but empty: unset it, "
            "or give every rank of the job the same value");
  }
  detail::check_job_token(token, "environment variable WHOLESTORE_JOB_TOKEN");
  return token;
}

std::pair<std::string, int> master_address_from_env() {
  std::pair<std::string, int> address{"127.0.0.1", 29500};
  if (const char* addr = std::getenv("MASTER_ADDR")) {
    WM_EXPECTS(*addr != '\0', "environment variable MASTER_ADDR is empty");
    address.first = addr;
  }
  if (const char* port = std::getenv("WHOLESTORE_MASTER_PORT")) {
    address.second = static_cast<int>(parse_env_int("WHOLESTORE_MASTER_PORT", port, 1, 65535));
    return address;
  }
  if (const char* port = std::getenv("MASTER_PORT")) {
    address.second = static_cast<int>(parse_env_int("MASTER_PORT", port, 1, 65535));
    // torchrun's agent hosts its own store at MASTER_PORT for the workers' process groups
    // (TORCHELASTIC_USE_AGENT_STORE), so this job's store, which rank 0 hosts, takes the
    // next port.
    const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent != nullptr && (std::string(agent) == "True" || std::string(agent) == "1")) {
      WM_EXPECTS(address.second < 65535,
                 "MASTER_PORT 65535 leaves no port for wholestore's store beside torchrun's "
                 "agent store (which holds MASTER_PORT): set WHOLESTORE_MASTER_PORT");
      ++address.second;
    }
  }
  return address;
}

std::unique_ptr<bootstrap> bootstrap_from_env(std::chrono::milliseconds timeout) {
  std::optional<launch_env> env = read_launch_env();
  WM_EXPECTS(env.has_value(),
             "no launch environment: set RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (as "
             "`wholestore launch` and torchrun do) or run under mpirun");
  return make_tcp_bootstrap(env->rank, env->size, env->master_addr, env->master_port, timeout,
                            env->job_token);
}

std::unique_ptr<bootstrap> make_job_bootstrap(std::chrono::milliseconds timeout) {
  if (read_launch_env()) return bootstrap_from_env(timeout);
  return std::move(make_thread_bootstraps(1, timeout).front());
}

}  // namespace wholememory
