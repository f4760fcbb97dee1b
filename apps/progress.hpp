/*
 * Progress of a long step on the lead process: a bar on a terminal, otherwise a line every
 * ~10% (so logs stay short).  Used by sample (load, sample), gen (its phases) and convert
 * (bytes read).
 */
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace wholestore::apps {

class progress_display {
 public:
  /// `enabled` false prints nothing (ranks other than the lead); `what` labels the step.
  progress_display(bool enabled, const char* what) : enabled_(enabled), what_(what) {
    tty_ = enabled_ && ::isatty(STDOUT_FILENO);
  }
  /// `done` of `total` units; a total of 0 (unknown) prints nothing.
  void update(std::uint64_t done, std::uint64_t total) {
    if (!enabled_ || total == 0) return;
    if (done > total) done = total;
    const int pct =
        static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
    if (tty_) {
      if (pct == last_pct_) return;
      const int width = 40, fill = pct * width / 100;
      std::printf("\r  %-10s [%s%s] %3d%%", what_, std::string(fill, '#').c_str(),
                  std::string(width - fill, '.').c_str(), pct);
      if (done >= total) std::printf("\n");
      std::fflush(stdout);
    } else if (pct >= next_pct_ || (done >= total && last_pct_ < 100)) {
      std::printf("  %s %d%% (%llu/%llu)\n", what_, pct, static_cast<unsigned long long>(done),
                  static_cast<unsigned long long>(total));
      std::fflush(stdout);
      next_pct_ = (pct / 10 + 1) * 10;
    }
    last_pct_ = pct;
  }

 private:
  bool enabled_, tty_ = false;
  const char* what_;
  int next_pct_ = 0, last_pct_ = -1;
};

}  // namespace wholestore::apps
