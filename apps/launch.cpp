// `wholestore launch`: runs N ranks of a command on this host with the torchrun-style
// environment that bootstrap_from_env() reads, streams their output with a rank prefix, and
// stops the whole job as soon as one rank fails, so that a crash never leaves the others
// waiting for a peer until their timeout.
#include "cli.hpp"
#include "commands.hpp"
#include "config.hpp"

#include <wholememory/bootstrap.hpp>
#include <wholememory/host_identity.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace wholestore::apps {
namespace {

using clock_type = std::chrono::steady_clock;

// Time the other ranks get to exit after SIGTERM before they are killed.
constexpr std::chrono::seconds stop_grace{3};
// Output a rank's helpers may still write after every rank has exited is read this long.
constexpr std::chrono::seconds drain_grace{2};
// A line longer than this is passed on in pieces rather than held in memory.
constexpr std::size_t max_line = 64 * 1024;

struct launch_options {
  int ranks = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;      // 0: pick a free one
  int hosts = 0;            // --hosts: simulated hosts (0: the machine's own identity)
  std::string job_token;    // WHOLESTORE_JOB_TOKEN of every rank: fresh per launch
  std::string host_prefix;  // with --hosts: "<this host>/sim", the simulated hosts' ids + index
  std::vector<char*> command;
};

// Parses a whole decimal integer in [min_value, max_value].
std::optional<int> parse_int(const char* text, long min_value, long max_value) {
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || errno == ERANGE || value < min_value || value > max_value)
    return std::nullopt;
  return static_cast<int>(value);
}

// Returns the options, or nullopt when -h/--help came before the command; throws usage_error
// when they are unusable.
std::optional<launch_options> parse_options(int argc, char** argv) {
  launch_options opts;
  bool have_ranks = false;
  int i = 1;
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") return std::nullopt;
    const bool takes_value =
        arg == "-n" || arg == "--master-addr" || arg == "--master-port" || arg == "--hosts";
    if (!takes_value) {
      if (!arg.empty() && arg[0] == '-') {
        throw usage_error("unknown option '" + arg + "'" +
                          did_you_mean(arg, {"-n", "--hosts", "--master-addr", "--master-port",
                                             "--help", "-h", "--"}));
      }
      break;  // the command starts here, without "--"
    }
    if (i + 1 >= argc) throw usage_error("option " + arg + " needs a value");
    const char* value = argv[++i];
    if (arg == "-n") {
      std::optional<int> n = parse_int(value, 1, 4096);
      if (!n)
        throw usage_error(std::string("-n '") + value + "' must be a number of ranks in [1, 4096]");
      opts.ranks = *n;
      have_ranks = true;
    } else if (arg == "--hosts") {
      std::optional<int> h = parse_int(value, 1, 4096);
      if (!h)
        throw usage_error(std::string("--hosts '") + value + "' must be a number in [1, 4096]");
      opts.hosts = *h;
    } else if (arg == "--master-addr") {
      if (*value == '\0') throw usage_error("--master-addr is empty");
      opts.master_addr = value;
    } else {
      std::optional<int> port = parse_int(value, 1, 65535);
      if (!port)
        throw usage_error(std::string("--master-port '") + value + "' must be in [1, 65535]");
      opts.master_port = *port;
    }
  }
  if (!have_ranks) throw usage_error("missing -n N (the number of ranks)");
  if (opts.hosts > 0 && opts.ranks % opts.hosts != 0)
    throw usage_error("--hosts " + std::to_string(opts.hosts) + " does not divide -n " +
                      std::to_string(opts.ranks) + " (every simulated host gets as many ranks)");
  if (i >= argc) throw usage_error("no command to run (put it after --)");
  opts.command.assign(argv + i, argv + argc);
  opts.command.push_back(nullptr);
  return opts;
}

// A TCP port that was free a moment ago on every local address.  Rank 0 binds it shortly after;
// the window in which another process could take it is small, as with torchrun.
int pick_free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  int err = errno;
  ::close(fd);
  if (port <= 0)
    throw std::runtime_error(std::string("cannot pick a free port: ") + std::strerror(err));
  return port;
}

// 128 random bits as 32 hex digits: the job's token, which tells its ranks from those of
// another job that uses the same master port (make_tcp_bootstrap).
std::string make_job_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<std::size_t>(n);
  }
  static const char digits[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += digits[b >> 4];
    token += digits[b & 15];
  }
  return token;
}

void write_all(int fd, const char* data, std::size_t len) {
  while (len > 0) {
    ssize_t n = ::write(fd, data, len);
    if (n > 0) {
      data += n;
      len -= static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;  // our own output is gone (closed pipe): nothing better to do with the text
    }
  }
}

// One of a rank's output pipes: reads what is there and writes whole lines, prefixed, to
// `dest_fd`, keeping a partial line until its end arrives or the pipe closes.
class line_stream {
 public:
  line_stream(int fd, int dest_fd, std::string prefix)
      : fd_(fd), dest_fd_(dest_fd), prefix_(std::move(prefix)) {}
  line_stream(const line_stream&) = delete;
  line_stream& operator=(const line_stream&) = delete;
  ~line_stream() { close(); }

  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }

  // Reads what the pipe holds now; at end of file, flushes the partial line and closes.
  void on_readable() {
    char buffer[16 * 1024];
    for (;;) {
      ssize_t n = ::read(fd_, buffer, sizeof(buffer));
      if (n > 0) {
        partial_.append(buffer, static_cast<std::size_t>(n));
        emit_lines();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      close();  // end of file, or an error that ends the stream just the same
      return;
    }
  }

  void close() {
    if (!partial_.empty()) {
      partial_ += '\n';
      emit(partial_.data(), partial_.size());
      partial_.clear();
    }
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  void emit_lines() {
    std::size_t start = 0;
    for (;;) {
      std::size_t newline = partial_.find('\n', start);
      if (newline == std::string::npos) break;
      emit(partial_.data() + start, newline + 1 - start);
      start = newline + 1;
    }
    partial_.erase(0, start);
    if (partial_.size() >= max_line) {
      partial_ += '\n';
      emit(partial_.data(), partial_.size());
      partial_.clear();
    }
  }

  // One write per line, so that lines of different ranks never interleave mid-line.
  void emit(const char* line, std::size_t len) {
    std::string out = prefix_;
    out.append(line, len);
    write_all(dest_fd_, out.data(), out.size());
  }

  int fd_;
  int dest_fd_;
  std::string prefix_;
  std::string partial_;
};

// Signals arrive through a pipe, so that the poll loop sees them without races.
int signal_pipe_write = -1;

extern "C" void on_signal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(signal_pipe_write, &byte, 1);
  errno = saved;
}

// Installs the launcher's signal handling and restores the previous one on destruction.
class signal_guard {
 public:
  signal_guard() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    read_fd_ = fds[0];
    signal_pipe_write = fds[1];
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < handled_count; ++i) ::sigaction(handled[i], &sa, &saved_[i]);
    // A closed stdout must not kill the launcher and leave the ranks unsupervised.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    ::sigaction(SIGPIPE, &ignore, &saved_pipe_);
  }
  ~signal_guard() {
    for (std::size_t i = 0; i < handled_count; ++i) ::sigaction(handled[i], &saved_[i], nullptr);
    ::sigaction(SIGPIPE, &saved_pipe_, nullptr);
    ::close(signal_pipe_write);
    signal_pipe_write = -1;
    ::close(read_fd_);
  }
  signal_guard(const signal_guard&) = delete;
  signal_guard& operator=(const signal_guard&) = delete;

  int fd() const { return read_fd_; }

  // Signals received since the last call.
  std::vector<int> take() {
    std::vector<int> out;
    unsigned char buffer[64];
    ssize_t n;
    while ((n = ::read(read_fd_, buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR)) {
      for (ssize_t i = 0; i < n; ++i) out.push_back(buffer[i]);
    }
    return out;
  }

  // For a forked child before exec: the launcher's handlers must not run there.  Called with
  // the handled signals blocked (fork_blocked), so that a signal sent to the child before it
  // gets here (stop_all of a job whose other rank already failed) waits and then meets the
  // default action, rather than the launcher's handler, which would write it into the pipe the
  // child shares with the launcher and make the launcher believe it was signalled.
  static void reset_in_child() {
    for (std::size_t i = 0; i < handled_count; ++i) ::signal(handled[i], SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
  }

  // fork() with the handled signals blocked in the child until it has called reset_in_child
  // and unblock_in_child.  The launcher gets its own mask back before fork_blocked returns.
  static pid_t fork_blocked(sigset_t& saved) {
    sigset_t block;
    sigemptyset(&block);
    for (std::size_t i = 0; i < handled_count; ++i) sigaddset(&block, handled[i]);
    ::sigprocmask(SIG_BLOCK, &block, &saved);
    const pid_t pid = ::fork();
    if (pid != 0) ::sigprocmask(SIG_SETMASK, &saved, nullptr);
    return pid;
  }
  static void unblock_in_child(const sigset_t& saved) {
    ::sigprocmask(SIG_SETMASK, &saved, nullptr);
  }

 private:
  static constexpr int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  static constexpr std::size_t handled_count = sizeof(handled) / sizeof(handled[0]);
  int read_fd_ = -1;
  struct sigaction saved_[handled_count] {};
  struct sigaction saved_pipe_ {};
};

struct rank_process {
  int rank = 0;
  pid_t pid = -1;  // also the rank's process group
  bool running = false;
  int wait_status = 0;
  std::unique_ptr<line_stream> out;
  std::unique_ptr<line_stream> err;
};

std::string describe_exit(int rank, int wait_status) {
  std::string who = "rank " + std::to_string(rank);
  if (WIFEXITED(wait_status))
    return who + " exited with status " + std::to_string(WEXITSTATUS(wait_status));
  int sig = WTERMSIG(wait_status);
  const char* name = ::strsignal(sig);
  return who + " killed by signal " + std::to_string(sig) +
         (name ? std::string(" (") + name + ")" : "");
}

int exit_code_of(int wait_status) {
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

// Starts one rank in a process group of its own, so that stopping it also stops whatever it
// started (a shell's children).  The rank dies with the launcher (SIGKILL at its death), even
// when the launcher is killed with SIGKILL and can forward nothing.
void start_rank(rank_process& proc, const launch_options& opts) {
  const pid_t launcher = ::getpid();
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  sigset_t mask;
  pid_t pid = signal_guard::fork_blocked(mask);
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    signal_guard::reset_in_child();
    signal_guard::unblock_in_child(mask);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // Died between fork and prctl: the signal will never come.
    if (::getppid() != launcher) ::_exit(127);
    ::setpgid(0, 0);
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    const std::string rank = std::to_string(proc.rank);
    const std::string size = std::to_string(opts.ranks);
    const std::string port = std::to_string(opts.master_port);
    // Simulated hosts: contiguous blocks of ranks, as a launcher per node numbers them.
    const int per_host = opts.hosts > 0 ? opts.ranks / opts.hosts : opts.ranks;
    const std::string local_rank = std::to_string(proc.rank % per_host);
    const std::string local_size = std::to_string(per_host);
    ::setenv("RANK", rank.c_str(), 1);
    ::setenv("WORLD_SIZE", size.c_str(), 1);
    ::setenv("LOCAL_RANK", local_rank.c_str(), 1);
    ::setenv("LOCAL_WORLD_SIZE", local_size.c_str(), 1);
    if (opts.hosts > 0) {
      const std::string host = opts.host_prefix + std::to_string(proc.rank / per_host);
      ::setenv("WHOLESTORE_HOST_ID", host.c_str(), 1);
      ::setenv("NCCL_HOSTID", host.c_str(), 1);
    }
    ::setenv("MASTER_ADDR", opts.master_addr.c_str(), 1);
    ::setenv("MASTER_PORT", port.c_str(), 1);
    ::setenv("WHOLESTORE_JOB_TOKEN", opts.job_token.c_str(), 1);
    ::execvp(opts.command[0], opts.command.data());
    std::string msg = std::string("wholestore launch: cannot run '") + opts.command[0] +
                      "': " + std::strerror(errno) + "\n";
    write_all(STDERR_FILENO, msg.data(), msg.size());
    ::_exit(127);
  }
  // Also here: a signal sent to the group right after fork must find it.
  ::setpgid(pid, pid);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  const std::string prefix = "[rank " + std::to_string(proc.rank) + "] ";
  proc.pid = pid;
  proc.running = true;
  proc.out = std::make_unique<line_stream>(out_pipe[0], STDOUT_FILENO, prefix);
  proc.err = std::make_unique<line_stream>(err_pipe[0], STDERR_FILENO, prefix);
}

// Kills the process groups of the ranks when the launcher dies without ending them (SIGKILL,
// or a crash): the ranks' death signal covers the ranks, not what they started (a shell's
// children), which live in their groups.  A forked process, not a thread: it must outlive the
// launcher.  It waits on a pipe whose only write end the launcher holds; end of file without
// the launcher's "done" byte means the launcher is gone.
class watchdog {
 public:
  explicit watchdog(const std::vector<pid_t>& groups) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t launcher = ::getpid();
    sigset_t mask;
    pid_ = signal_guard::fork_blocked(mask);
    if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid_ == 0) watch(fds[0], fds[1], launcher, groups, mask);
    ::close(fds[0]);
    write_fd_ = fds[1];
  }
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;

  // The launcher ended its ranks itself: the watchdog leaves without killing.
  ~watchdog() {
    const char done = 1;
    while (::write(write_fd_, &done, 1) < 0 && errno == EINTR) {
    }
    ::close(write_fd_);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }

 private:
  [[noreturn]] static void watch(int read_fd, int write_fd, pid_t launcher,
                                 const std::vector<pid_t>& groups, const sigset_t& mask) {
    ::close(write_fd);
    // Not the launcher's handlers, and not the terminal's signals (the launcher forwards
    // those); stdout is the launcher's, and may be a pipe someone reads to its end.
    signal_guard::reset_in_child();
    for (int sig : {SIGINT, SIGHUP, SIGTERM, SIGQUIT}) ::signal(sig, SIG_IGN);
    signal_guard::unblock_in_child(mask);
    int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0) {
      ::dup2(devnull, STDIN_FILENO);
      ::dup2(devnull, STDOUT_FILENO);
    }
    ::prctl(PR_SET_NAME, "ws-launch-watch");
    char byte = 0;
    ssize_t n;
    while ((n = ::read(read_fd, &byte, 1)) < 0 && errno == EINTR) {
    }
    if (n == 1) ::_exit(0);
    for (pid_t group : groups) ::kill(-group, SIGKILL);
    const std::string line = "wholestore launch: the launcher (pid " + std::to_string(launcher) +
                             ") died; killed its ranks\n";
    write_all(STDERR_FILENO, line.data(), line.size());
    ::_exit(0);
  }

  pid_t pid_ = -1;
  int write_fd_ = -1;
};

class job {
 public:
  explicit job(launch_options opts) : opts_(std::move(opts)), procs_(opts_.ranks) {
    for (int r = 0; r < opts_.ranks; ++r) procs_[r].rank = r;
  }

  int run() {
    signal_guard signals;
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    for (auto& proc : procs_) {
      try {
        start_rank(proc, opts_);
      } catch (const std::exception& e) {
        note(std::string("cannot start rank ") + std::to_string(proc.rank) + ": " + e.what());
        first_failure_ = 1;
        stop_all(SIGTERM);
        break;
      }
    }
    std::vector<pid_t> groups;
    for (const auto& proc : procs_)
      if (proc.pid > 0) groups.push_back(proc.pid);
    std::optional<watchdog> guard;
    try {
      guard.emplace(groups);
    } catch (const std::exception& e) {
      note(std::string("cannot start the watchdog (the ranks still die with the launcher, what "
                       "they started may not): ") +
           e.what());
    }
    std::optional<clock_type::time_point> drain_deadline;
    for (;;) {
      reap();
      if (!any_running()) {
        if (!any_stream_open()) break;
        // Something a rank started may hold its pipes open for long: read for a while only.
        if (!drain_deadline) drain_deadline = clock_type::now() + drain_grace;
        if (clock_type::now() >= *drain_deadline) break;
      }
      if (kill_deadline_ && clock_type::now() >= *kill_deadline_) {
        stop_all(SIGKILL);
        kill_deadline_.reset();
      }
      poll_once(signals);
    }
    for (auto& proc : procs_) {
      if (proc.out) proc.out->close();
      if (proc.err) proc.err->close();
    }
    return first_failure_;
  }

 private:
  void note(const std::string& text) {
    std::string line = "wholestore launch: " + text + "\n";
    write_all(STDERR_FILENO, line.data(), line.size());
  }

  bool any_running() const {
    for (const auto& p : procs_)
      if (p.running) return true;
    return false;
  }

  bool any_stream_open() const {
    for (const auto& p : procs_)
      if ((p.out && p.out->open()) || (p.err && p.err->open())) return true;
    return false;
  }

  // Sends `sig` to every rank's process group, the exited ones too: their children may live.
  void stop_all(int sig) {
    for (const auto& p : procs_)
      if (p.pid > 0) ::kill(-p.pid, sig);
    if (sig != SIGKILL && !kill_deadline_) kill_deadline_ = clock_type::now() + stop_grace;
  }

  // Reaps every child that has ended: the ranks, and (as a subreaper) whatever they started
  // and left behind, which would otherwise stay zombies where init does not reap.
  void reap() {
    for (;;) {
      int st = 0;
      pid_t pid = ::waitpid(-1, &st, WNOHANG);
      if (pid < 0 && errno == EINTR) continue;
      if (pid <= 0) return;
      auto it = std::find_if(procs_.begin(), procs_.end(),
                             [&](const rank_process& p) { return p.pid == pid; });
      if (it == procs_.end() || !it->running) continue;
      rank_process& proc = *it;
      proc.running = false;
      proc.wait_status = st;
      // Its last words come before our report of its end.
      if (proc.out && proc.out->open()) proc.out->on_readable();
      if (proc.err && proc.err->open()) proc.err->on_readable();
      const bool failed = !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
      if (!failed) continue;
      if (first_failure_ == 0) {
        first_failure_ = exit_code_of(st);
        note(describe_exit(proc.rank, st) + (stopping_ ? "" : "; stopping the other ranks"));
        if (!stopping_) {
          stopping_ = true;
          stop_all(SIGTERM);
        }
      } else if (!stopped_by_us(st)) {
        note(describe_exit(proc.rank, st));
      }
    }
  }

  bool stopped_by_us(int st) const {
    return stopping_ && WIFSIGNALED(st) &&
           (WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGKILL || WTERMSIG(st) == forwarded_);
  }

  void poll_once(signal_guard& signals) {
    std::vector<pollfd> fds;
    std::vector<line_stream*> streams;
    fds.push_back({signals.fd(), POLLIN, 0});
    for (auto& p : procs_) {
      for (line_stream* s : {p.out.get(), p.err.get()}) {
        if (s && s->open()) {
          fds.push_back({s->fd(), POLLIN, 0});
          streams.push_back(s);
        }
      }
    }
    // Wake up now and then regardless: deadlines, and a child whose SIGCHLD raced our reap.
    int rc = ::poll(fds.data(), fds.size(), 100);
    if (rc <= 0) return;
    if (fds[0].revents) {
      for (int sig : signals.take()) {
        if (sig == SIGCHLD) continue;
        forward(sig);
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents) streams[i - 1]->on_readable();
  }

  // The launcher was asked to stop: pass it on, and make sure the job ends even if a rank
  // ignores it.  A second request kills at once.
  void forward(int sig) {
    if (forwarded_ != 0) {
      note("received signal " + std::to_string(sig) + " again; killing the ranks");
      stop_all(SIGKILL);
      return;
    }
    forwarded_ = sig;
    stopping_ = true;
    note("received signal " + std::to_string(sig) + "; passing it on to the ranks");
    for (const auto& p : procs_)
      if (p.pid > 0) ::kill(-p.pid, sig);
    kill_deadline_ = clock_type::now() + stop_grace;
    if (first_failure_ == 0) first_failure_ = 128 + sig;
  }

  launch_options opts_;
  std::vector<rank_process> procs_;
  int first_failure_ = 0;
  bool stopping_ = false;
  int forwarded_ = 0;
  std::optional<clock_type::time_point> kill_deadline_;
};

}  // namespace

int run_launch(int argc, char** argv) {
  std::optional<launch_options> opts = parse_options(argc, argv);
  if (!opts) {
    std::fputs(command_help(launch_command()).c_str(), stdout);
    return 0;
  }
  // Every rank would refuse a bad WHOLESTORE_TIMEOUT: say it once, before starting them.
  wholememory::timeout_from_env();
  if (opts->master_port == 0) opts->master_port = pick_free_port();
  opts->job_token = make_job_token();
  if (opts->hosts > 0) opts->host_prefix = wholememory::host_identity() + "/sim";
  return job(std::move(*opts)).run();
}

const command_info& launch_command() {
  static const command_info info{
      "launch",
      "run N ranks of a command on this host",
      "-n N [--hosts H] [--master-addr A] [--master-port P] [--] CMD [ARG...]",
      "Runs N ranks of CMD on this host. Each rank gets `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, "
      "`LOCAL_WORLD_SIZE`, `MASTER_ADDR` (default 127.0.0.1) and `MASTER_PORT` (default: a free "
      "port) in its environment, the variables `torchrun` sets, `WHOLESTORE_JOB_TOKEN` (random, "
      "one per launch: the bootstrap refuses processes of another job that use the same port), "
      "and reads stdin from /dev/null; its output is prefixed with `[rank k]`. `--hosts H` "
      "simulates H hosts on this one (H divides N): ranks come in H contiguous blocks, "
      "`LOCAL_RANK` and `LOCAL_WORLD_SIZE` count within the block, and `WHOLESTORE_HOST_ID` and "
      "`NCCL_HOSTID` name the block's host, so that wholestore and NCCL treat the blocks as "
      "separate machines (the host communicator refuses to span them, NCCL connects them "
      "through its network transport). When a rank fails, "
      "the others are "
      "stopped and launch exits with that rank's status (128 + the signal when it was "
      "killed). SIGINT, SIGTERM and SIGHUP are passed on to the ranks; when launch itself is "
      "killed (even with SIGKILL), its ranks and whatever they started die with it.\n\n"
      "launch's options end at `--` or at the first argument that does not start with `-`; "
      "what follows, `--help` included, goes to CMD.",
      {},
      {"wholestore launch -n 2 -- wholestore sample configs/sample.yaml",
       "wholestore launch -n 4 --master-port 29500 -- wholestore demo configs/demo.yaml",
       "wholestore launch -n 4 --hosts 2 -- wholestore sample configs/sample.yaml"},
      run_launch};
  return info;
}

}  // namespace wholestore::apps
