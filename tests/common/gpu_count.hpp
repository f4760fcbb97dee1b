// Visible CUDA devices for the GPU tests' skips, counted in a forked child so that the test
// process itself never initializes CUDA (its later forks of rank processes need that).
#pragma once

#include <wholememory/device.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace wholestore_test {

/// The device count, at most 100 (an exit status), 0 when the child cannot be forked.
inline int gpu_count() {
  static const int count = [] {
    std::fflush(stdout);
    const pid_t pid = ::fork();
    if (pid < 0) return 0;
    if (pid == 0) ::_exit(std::min(wholememory::device_count(), 100));
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  }();
  return count;
}

}  // namespace wholestore_test
