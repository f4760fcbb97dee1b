// The library's levelled log: level names and numbers, what each level lets through, the line's
// form (prefix with the launch rank, level, message, one line), and that a filtered message is
// not even built.
#include <wholememory/log.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

using wholememory::log_level;

TEST(Log, LevelsParseByNameAndNumber) {
  EXPECT_EQ(wholememory::parse_log_level("error"), log_level::error);
  EXPECT_EQ(wholememory::parse_log_level("warn"), log_level::warn);
  EXPECT_EQ(wholememory::parse_log_level("warning"), log_level::warn);
  EXPECT_EQ(wholememory::parse_log_level("info"), log_level::info);
  EXPECT_EQ(wholememory::parse_log_level("debug"), log_level::debug);
  for (int i = 0; i <= 3; ++i)
    EXPECT_EQ(wholememory::parse_log_level(std::to_string(i)), static_cast<log_level>(i));
  for (const char* bad : {"", "4", "-1", "WARN", "verbose", "1 "})
    EXPECT_FALSE(wholememory::parse_log_level(bad).has_value()) << "'" << bad << "'";
}

// Runs one WM_LOG at `level` with the current level set to `current`; returns what reached
// stderr and whether the message was built.
std::pair<std::string, bool> logged(log_level current, log_level level, const char* rank) {
  wholememory::set_log_level(current);
  if (rank) {
    ::setenv("RANK", rank, 1);
  } else {
    ::unsetenv("RANK");
  }
  bool built = false;
  auto mark = [&] {
    built = true;
    return 42;
  };
  testing::internal::CaptureStderr();
  WM_LOG(level, "freed " << mark() << " bytes");
  std::string out = testing::internal::GetCapturedStderr();
  ::unsetenv("RANK");
  return {out, built};
}

TEST(Log, EachLevelLetsThroughItselfAndAbove) {
  const log_level all[] = {log_level::error, log_level::warn, log_level::info, log_level::debug};
  for (log_level current : all) {
    for (log_level level : all) {
      auto [out, built] = logged(current, level, nullptr);
      if (level <= current) {
        EXPECT_EQ(out, std::string("wholestore ") + wholememory::log_level_name(level) +
                           ": freed 42 bytes\n");
        EXPECT_TRUE(built);
      } else {
        EXPECT_EQ(out, "");
        EXPECT_FALSE(built) << "a filtered message was built";
      }
    }
  }
  wholememory::set_log_level(log_level::warn);
}

TEST(Log, TheLaunchRankLeadsTheLine) {
  EXPECT_EQ(logged(log_level::warn, log_level::warn, "3").first,
            "wholestore[rank 3] warning: freed 42 bytes\n");
  EXPECT_EQ(logged(log_level::warn, log_level::error, "0").first,
            "wholestore[rank 0] error: freed 42 bytes\n");
  wholememory::set_log_level(log_level::warn);
}

}  // namespace
