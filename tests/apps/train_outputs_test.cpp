// The output files of `wholestore train` (apps/npy.hpp, apps/svg_plot.hpp): the .npy header
// byte for byte and the written array, and the SVG chart of loss and ROC-AUC per epoch.
#include "npy.hpp"
#include "svg_plot.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

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

}  // namespace
