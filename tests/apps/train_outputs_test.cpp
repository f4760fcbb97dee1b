// The output files of `wholestore train` (apps/npy.hpp, apps/svg_plot.hpp): the .npy header
// byte for byte and the written array, and the SVG chart of loss and ROC-AUC per epoch; and how
// every output file reaches the disk (apps/output_file.hpp): a write that fails (a file size
// limit, a full device, a writer that throws) leaves no partial file and keeps the previous
// file of that name; devices are written in place, links stay links, modes are kept.
#include "common/temp_dir.hpp"
#include "config.hpp"
#include "npy.hpp"
#include "output_file.hpp"
#include "report.hpp"
#include "svg_plot.hpp"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace wholestore::apps;
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() /
                     ("wholestore-train-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  return p.string();
}

TEST(Npy, HeaderBytes) {
  const std::string h = npy_header(4039, 128);
  ASSERT_GE(h.size(), 10u);
  EXPECT_EQ(h.substr(0, 6), std::string("\x93NUMPY", 6));
  EXPECT_EQ(h[6], '\x01');
  EXPECT_EQ(h[7], '\x00');
  const std::size_t len =
      static_cast<unsigned char>(h[8]) | (static_cast<unsigned char>(h[9]) << 8);
  EXPECT_EQ(len + 10, h.size());
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.back(), '\n');
  EXPECT_EQ(h.find("{'descr': '<f4', 'fortran_order': False, 'shape': (4039, 128), }"), 10u);
  EXPECT_EQ(h.find_first_not_of(' ', h.find('}') + 1), h.size() - 1);  // spaces, then '\n'
  // The written file: header then the floats, little-endian.
  const std::string path = temp_dir("npy") + ".npy";
  const float data[] = {1.0f, -2.5f, 3.25f, 0.0f, 5.0f, 6.0f};
  write_npy(path, data, 2, 3);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::string bytes(4096, '\0');
  bytes.resize(std::fread(&bytes[0], 1, bytes.size(), f));
  std::fclose(f);
  const std::string h2 = npy_header(2, 3);
  ASSERT_EQ(bytes.size(), h2.size() + sizeof data);
  EXPECT_EQ(bytes.substr(0, h2.size()), h2);
  EXPECT_EQ(std::memcmp(bytes.data() + h2.size(), data, sizeof data), 0);
  fs::remove(path);
}

TEST(Svg, ChartHasBothSeries) {
  const std::string svg = svg_line_chart("t <1>", "epoch", {"loss", "#111", {1, 2, 3}, {3, 2, 1}},
                                         {"ROC-AUC", "#222", {1, 3}, {0.5, 0.9}});
  EXPECT_EQ(svg.rfind("<svg xmlns=", 0), 0u);
  EXPECT_NE(svg.find("t &lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#111\""), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"#222\""), std::string::npos);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  // One point only (a one-epoch run) still draws.
  EXPECT_NE(svg_line_chart("x", "epoch", {"loss", "#111", {1}, {2}}, {}).find("<circle"),
            std::string::npos);
}

std::string contents(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

// Runs `write` in a child process whose files may not grow past 16 KiB (RLIMIT_FSIZE, which
// binds root too; SIGXFSZ ignored, so that the write fails with EFBIG rather than killing it).
// Returns the config_error's message, or "(no error)" / "(other: ...)".
std::string error_under_size_limit(const std::function<void()>& write) {
  int fds[2];
  if (::pipe(fds) != 0) return "(pipe failed)";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{16 * 1024, 16 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::string msg = "(no error)";
    try {
      write();
    } catch (const wholestore::apps::config_error& e) {
      msg = e.what();
    } catch (const std::exception& e) {
      msg = std::string("(other: ") + e.what() + ")";
    }
    [[maybe_unused]] ssize_t n = ::write(fds[1], msg.data(), msg.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return msg;
}

TEST(OutputFiles, FailedWritesKeepThePreviousFileAndLeaveNothing) {
  const wholestore_test::temp_dir dir("output-files");
  const std::vector<float> data(4096 * 64, 0.5f);  // 1 MiB
  const std::string big(200 * 1024, 'x');
  struct output {
    const char* option;
    std::string file;
    std::function<void(const std::string&)> write;
  };
  const std::vector<output> outputs = {
      {"--export", "emb.npy", [&](const std::string& p) { write_npy(p, data.data(), 4096, 64); }},
      {"--plot", "plot.svg", [&](const std::string& p) { write_svg(p, big); }},
      {"--report", "r.yaml",
       [&](const std::string& p) {
         write_report(p, report_body("train").add("big", big), nullptr);
       }},
  };
  for (const output& o : outputs) {
    const fs::path path = dir.path / o.file;
    std::ofstream(path) << "the previous " << o.option << " output\n";
    const std::string before = contents(path);
    const std::string msg = error_under_size_limit([&] { o.write(path.string()); });
    EXPECT_EQ(msg.rfind(std::string(o.option) + ": cannot write " + path.string() + ": ", 0), 0u)
        << msg;
    EXPECT_NE(msg.find("File too large"), std::string::npos) << msg;
    EXPECT_EQ(contents(path), before) << o.option << ": the previous file was changed";
    // A new name: nothing at all is left.
    const fs::path fresh = dir.path / ("new-" + o.file);
    EXPECT_NE(error_under_size_limit([&] { o.write(fresh.string()); }).find("File too large"),
              std::string::npos);
    EXPECT_FALSE(fs::exists(fresh)) << o.option;
    EXPECT_EQ(names_in(dir.path), std::vector<std::string>{o.file}) << o.option << ": leftovers";
    // Without the limit: written whole, the previous file replaced.
    o.write(path.string());
    EXPECT_GT(fs::file_size(path), 100u * 1024) << o.option;
    EXPECT_EQ(names_in(dir.path), std::vector<std::string>{o.file});
    fs::remove(path);
  }
}

TEST(OutputFiles, WriterThatThrowsLeavesThePreviousFile) {
  const wholestore_test::temp_dir dir("output-files");
  const fs::path path = dir.path / "out.txt";
  std::ofstream(path) << "old";
  EXPECT_THROW(write_output_file(path.string(), "--plot",
                                 [](std::FILE* f) {
                                   std::fputs("half of the new", f);
                                   throw std::runtime_error("stop");
                                 }),
               std::runtime_error);
  EXPECT_EQ(contents(path), "old");
  EXPECT_EQ(names_in(dir.path), std::vector<std::string>{"out.txt"});
}

TEST(OutputFiles, ModesLinksAndDevices) {
  const wholestore_test::temp_dir dir("output-files");
  // A replaced file keeps its mode; a new one gets 0666 less the umask.
  const fs::path path = dir.path / "r.yaml";
  std::ofstream(path) << "old";
  ::chmod(path.c_str(), 0640);
  write_output_file(path.string(), "--report", std::string("new"));
  EXPECT_EQ(contents(path), "new");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  const mode_t mask = ::umask(022);
  const fs::path fresh = dir.path / "fresh.yaml";
  write_output_file(fresh.string(), "--report", std::string("x"));
  ::umask(mask);
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  // A link to a file stays a link; the file it names gets the contents.
  const fs::path link = dir.path / "link.yaml";
  fs::create_symlink(path, link);
  write_output_file(link.string(), "--report", std::string("through the link"));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(contents(path), "through the link");
  // Devices are written in place, never replaced (as root a rename would replace /dev/full).
  EXPECT_NO_THROW(write_output_file("/dev/null", "--plot", std::string("discarded")));
  try {
    write_output_file("/dev/full", "--export", std::string(8192, 'x'));
    ADD_FAILURE() << "a write to /dev/full succeeded";
  } catch (const wholestore::apps::config_error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("--export: cannot write /dev/full: ", 0), 0u) << msg;
    EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
  }
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // No name at all.
  EXPECT_THROW(write_output_file("", "--export", std::string("x")), wholestore::apps::config_error);
}

}  // namespace
