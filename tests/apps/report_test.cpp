// --report files (apps/report.hpp) read back: texts that hand-written YAML broke (": ", "#", a
// quote, a newline, non-ASCII letters) and texts YAML would read as another type ("true",
// "12", "") come back as the same strings, in the body, in rows and in the config block;
// numbers, booleans and counts keep their types; lists keep their layout (`[]` when empty, a
// row per line) and the version block is there.
#include "report.hpp"
#include "common/temp_dir.hpp"
#include "config.hpp"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace wholestore::apps;

const std::vector<std::string> hard_texts = {
    "datasets/a: b",
    "run #3",
    "say \"hi\"",
    "two\nlines",
    "naïve/データ/ü",
    "ends with a newline\n",
    "  blanks around  ",
    "tab\there",
    "back\\slash",
    "'single'",
    "- dash",
    "[a, b]",
    "{a: 1}",
    "&anchor",
    "*alias",
    "!tag",
    "|pipe",
    ">fold",
    "%directive",
    "@at",
    "`tick",
    "?q",
    ": colon first",
    "trailing colon:",
    "15,10,5",
    "R-MAT (100 nodes, 1000 edges, seed 0)",
    // Texts YAML would read as another type when written plain.
    "",
    "true",
    "False",
    "yes",
    "off",
    "y",
    "null",
    "~",
    "12",
    "-3",
    "0x1F",
    "1e5",
    "1_000",
    "1:20",
    ".inf",
    "-.nan",
    "=",
};

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A scalar that was quoted reads back with the tag "!"; a plain one has "?" and is typed by its
// text (a reader such as PyYAML would turn "true" into a boolean).
void expect_text(const YAML::Node& node, const std::string& text, const std::string& where) {
  ASSERT_TRUE(node.IsScalar()) << where;
  EXPECT_EQ(node.as<std::string>(), text) << where;
  if (node.Tag() == "?") {
    // Plain: it must not look like another type.
    bool as_bool = false;
    EXPECT_FALSE(YAML::convert<bool>::decode(node, as_bool)) << where << ": plain " << text;
    double as_number = 0;
    EXPECT_FALSE(YAML::convert<double>::decode(node, as_number)) << where << ": plain " << text;
    EXPECT_FALSE(node.as<std::string>().empty()) << where;
  }
}

TEST(Report, HardTextsReadBackAsTheSameStrings) {
  const wholestore_test::temp_dir dir("report-test");
  const std::string path = dir.str() + "/r.yaml";
  report_body body("test");
  std::vector<report_row> rows;
  report_row mapping;
  for (std::size_t i = 0; i < hard_texts.size(); ++i) {
    body.add("text_" + std::to_string(i), hard_texts[i]);
    rows.push_back({{"case", hard_texts[i]}, {"quoted", report_value::quoted(hard_texts[i])}});
    mapping.emplace_back("m" + std::to_string(i), hard_texts[i]);
  }
  body.add_mapping("mapping", mapping).add_rows("rows", rows);
  // The config block: a string key holds each text in turn (one report per text).
  const std::vector<config_key> schema = {
      {"output", value_kind::string, "", "a path"},
      {"group.name", value_kind::string, "", "a nested string"},
      {"count", value_kind::integer, "5", "an integer"},
      {"flag", value_kind::boolean, "true", "a boolean"},
  };
  write_report(path, body, nullptr);
  const YAML::Node root = YAML::LoadFile(path);
  EXPECT_EQ(root["command"].as<std::string>(), "test");
  for (std::size_t i = 0; i < hard_texts.size(); ++i) {
    const std::string where = "text " + std::to_string(i);
    expect_text(root["text_" + std::to_string(i)], hard_texts[i], where);
    expect_text(root["mapping"]["m" + std::to_string(i)], hard_texts[i], where + " (mapping)");
    expect_text(root["rows"][i]["case"], hard_texts[i], where + " (row)");
    EXPECT_EQ(root["rows"][i]["quoted"].Tag(), "!") << where;
    EXPECT_EQ(root["rows"][i]["quoted"].as<std::string>(), hard_texts[i]) << where;
  }
  for (const std::string& text : hard_texts) {
    config cfg = load_config(schema, "", {"output=" + text, "group.name=" + text});
    write_report(path, report_body("test"), &cfg);
    const YAML::Node c = YAML::LoadFile(path)["config"];
    expect_text(c["output"], text, "config output '" + text + "'");
    expect_text(c["group"]["name"], text, "config group.name '" + text + "'");
    EXPECT_EQ(c["count"].as<int>(), 5);
    EXPECT_TRUE(c["flag"].as<bool>());
  }
}

TEST(Report, ValuesKeepTheirTypesAndLayout) {
  const wholestore_test::temp_dir dir("report-test");
  const std::string path = dir.str() + "/r.yaml";
  report_body body("bench");
  body.add("ranks", 2)
      .add("bytes", std::numeric_limits<std::uint64_t>::max())
      .add("offset", std::int64_t{-7})
      .add("seconds", 0.125)
      .add("rate", 1.0 / 3.0)
      .add("not_a_number", std::nan(""))
      .add("infinite", std::numeric_limits<double>::infinity())
      .add("ok", true)
      .add_mapping("ceilings_gbps", {{"peer", 40.5}, {"host_memcpy", 12.25}})
      .add_rows("cases", {{{"op", "gather"}, {"ms", 1.5}}, {{"op", "scatter"}, {"ms", 2.0}}})
      .add_rows("cache_cases", {});
  write_report(path, body, nullptr);
  const std::string text = read_all(path);
  // The layout the tests and readers of reports rely on.
  EXPECT_EQ(text.rfind("command: bench\nranks: 2\n", 0), 0u) << text;
  EXPECT_NE(text.find("\ncases:\n  - {op: gather, ms: 1.5}\n  - {op: scatter, ms: 2}\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\ncache_cases: []\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nversion:\n  wholestore: \""), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
  const YAML::Node root = YAML::LoadFile(path);
  EXPECT_EQ(root["ranks"].as<int>(), 2);
  EXPECT_EQ(root["bytes"].as<std::uint64_t>(), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(root["offset"].as<std::int64_t>(), -7);
  EXPECT_EQ(root["seconds"].as<double>(), 0.125);
  EXPECT_NEAR(root["rate"].as<double>(), 1.0 / 3.0, 1e-6);  // 6 significant digits by default
  EXPECT_TRUE(std::isnan(root["not_a_number"].as<double>()));
  EXPECT_TRUE(std::isinf(root["infinite"].as<double>()));
  EXPECT_TRUE(root["ok"].as<bool>());
  EXPECT_EQ(root["ceilings_gbps"]["peer"].as<double>(), 40.5);
  ASSERT_EQ(root["cases"].size(), 2u);
  EXPECT_EQ(root["cases"][1]["op"].as<std::string>(), "scatter");
  EXPECT_TRUE(root["cache_cases"].IsSequence());
  EXPECT_EQ(root["cache_cases"].size(), 0u);
  EXPECT_TRUE(root["version"]["git_commit"].IsScalar());
  EXPECT_FALSE(root["config"].IsDefined());

  // More digits where a command asks for them (train: 10).
  write_report(path, report_body("train").precision(10).add("loss", 1.0 / 3.0), nullptr);
  EXPECT_NE(read_all(path).find("\nloss: 0.3333333333\n"), std::string::npos) << read_all(path);
}

}  // namespace
