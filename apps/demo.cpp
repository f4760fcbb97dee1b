// `wholestore demo`: allocates WholeMemory over the ranks present, lets every rank write its
// part, and checks that every rank reads every byte back.  The main job until the sampling
// app exists.
#include "commands.hpp"
#include "config.hpp"
#include "report.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

const std::vector<config_key> demo_schema = {
    {"memory.type", value_kind::string, "continuous", "`continuous`, `chunked` or `distributed`"},
    {"memory.location", value_kind::string, "host",
     "`host` or `device` (needs a CUDA build and a GPU per rank)"},
    {"memory.size_mib", value_kind::integer, "256", "total size over all ranks, MiB"},
    {"memory.granularity", value_kind::integer, "64",
     "part boundaries are multiples of this many bytes (a multiple of 8)"},
    {"timeout_s", value_kind::number, "300",
     "seconds a collective waits for a missing rank before it fails on every rank, in (0, "
     "31536000]; `WHOLESTORE_TIMEOUT`, when set, replaces it"},
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::uint64_t pattern(std::uint64_t i) { return i * 0x9E3779B97F4A7C15ull ^ 0xD1B54A32D192ED03ull; }

// Fills [first, first + count) words of `dst` (anywhere) with the pattern, through a host
// staging buffer so device memory works too.
void fill(void* dst, std::uint64_t first, std::uint64_t count) {
  constexpr std::uint64_t chunk = 1 << 21;
  std::vector<std::uint64_t> buf(std::min(chunk, count));
  for (std::uint64_t done = 0; done < count; done += chunk) {
    std::uint64_t n = std::min(chunk, count - done);
    for (std::uint64_t k = 0; k < n; ++k) buf[k] = pattern(first + done + k);
    wholememory::copy_bytes(static_cast<std::uint64_t*>(dst) + done, buf.data(), n * 8);
  }
}

// Counts words of [first, first + count) at `src` that differ from the pattern.
std::uint64_t verify(const void* src, std::uint64_t first, std::uint64_t count) {
  constexpr std::uint64_t chunk = 1 << 21;
  std::vector<std::uint64_t> buf(std::min(chunk, count));
  std::uint64_t bad = 0;
  for (std::uint64_t done = 0; done < count; done += chunk) {
    std::uint64_t n = std::min(chunk, count - done);
    wholememory::copy_bytes(buf.data(), static_cast<const std::uint64_t*>(src) + done, n * 8);
    for (std::uint64_t k = 0; k < n; ++k) bad += buf[k] != pattern(first + done + k);
  }
  return bad;
}

}  // namespace

int run_demo(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(demo_schema, args.config_file, args.overrides);
  auto type = wholememory::parse_memory_type(cfg.get_string("memory.type"));
  auto location = wholememory::parse_memory_location(cfg.get_string("memory.location"));
  std::int64_t size_mib = cfg.get_int("memory.size_mib");
  std::int64_t granularity = cfg.get_int("memory.granularity");
  if (size_mib < 0) throw config_error("memory.size_mib must be >= 0");
  if (granularity < 8 || granularity % 8 != 0)
    throw config_error("memory.granularity must be a positive multiple of 8");
  auto timeout = collective_timeout(cfg);

  std::shared_ptr<wholememory::bootstrap> bs = wholememory::make_job_bootstrap(timeout);
  agree_on_config(*bs, cfg, "demo", {"timeout_s"});
  auto comm = wholememory::make_host_communicator(bs);
  const bool lead = comm->rank() == 0;
  if (location == wholememory::memory_location::device) {
    wholememory::set_device(wholememory::default_device(*comm));
  }

  const std::uint64_t bytes = static_cast<std::uint64_t>(size_mib) << 20;
  if (lead) {
    std::printf("wholestore demo: %d rank(s), %s %s memory, %.1f MiB, granularity %lld B\n",
                comm->size(), wholememory::memory_type_name(type),
                wholememory::memory_location_name(location), bytes / 1048576.0,
                static_cast<long long>(granularity));
    std::fflush(stdout);
  }

  auto t0 = std::chrono::steady_clock::now();
  wholememory::allocation_options opts;
  opts.granularity = static_cast<std::size_t>(granularity);
  opts.name = "demo: memory.size_mib " + std::to_string(size_mib);
  auto wm = wholememory::allocation::create(comm, bytes, type, location, opts);
  comm->barrier(nullptr);
  double create_s = seconds_since(t0);

  wholememory::part_info mine = wm.local_part();
  t0 = std::chrono::steady_clock::now();
  if (mine.bytes) fill(mine.ptr, mine.offset / 8, mine.bytes / 8);
  comm->barrier(nullptr);
  double fill_s = seconds_since(t0);

  // Every rank reads every byte it can see: all parts, or its own for distributed memory.
  t0 = std::chrono::steady_clock::now();
  std::uint64_t bad = 0, checked = 0;
  for (int p = 0; p < wm.num_parts(); ++p) {
    wholememory::part_info part = wm.part(p);
    if (part.ptr == nullptr || part.bytes == 0) continue;
    bad += verify(part.ptr, part.offset / 8, part.bytes / 8);
    checked += part.bytes;
  }
  double verify_s = seconds_since(t0);
  std::uint64_t totals[2] = {bad, checked};
  std::vector<std::uint64_t> all(2 * comm->size());
  bs->allgather(totals, all.data(), sizeof(totals));
  std::uint64_t all_bad = 0, all_checked = 0;
  for (int r = 0; r < comm->size(); ++r) {
    all_bad += all[2 * r];
    all_checked += all[2 * r + 1];
  }
  wm.free();

  if (lead) {
    auto gbs = [](double b, double s) { return s > 0 ? b / s / 1e9 : 0.0; };
    std::printf("  create     %8.3f s\n", create_s);
    std::printf("  fill       %8.3f s  %7.2f GB/s (all ranks)\n", fill_s, gbs(bytes, fill_s));
    std::printf("  verify     %8.3f s  %7.2f GB/s (rank 0, %.1f MiB read)\n", verify_s,
                gbs(checked, verify_s), checked / 1048576.0);
    std::printf("summary: %s, %llu bytes read back by all ranks, %llu mismatched words\n",
                all_bad == 0 ? "OK" : "FAILED", static_cast<unsigned long long>(all_checked),
                static_cast<unsigned long long>(all_bad));
    if (!args.report_file.empty()) {
      report_body report("demo");
      report.add("ranks", comm->size())
          .add("ok", all_bad == 0)
          .add("mismatched_words", all_bad)
          .add("bytes_verified", all_checked)
          .add("create_s", create_s)
          .add("fill_s", fill_s)
          .add("verify_s", verify_s);
      write_report(args.report_file, report, &cfg);
    }
  }
  return all_bad == 0 ? 0 : 1;
}

const command_info& demo_command() {
  static const command_info info{
      "demo",
      "WholeMemory tour: every rank writes, then reads everything back",
      "",
      "Allocates WholeMemory of the configured type and location over the ranks present, lets "
      "every rank write its part with a pattern, and has every rank read back every byte it can "
      "address (all parts, or its own for `distributed` memory). Prints the create, fill and "
      "verify times and ends with `summary: OK` or `summary: FAILED` (exit status 1).",
      {{"", "configs/demo.yaml", "", &demo_schema, ""}},
      {"wholestore demo configs/demo.yaml",
       "wholestore launch -n 4 -- wholestore demo configs/demo.yaml --set memory.type=chunked "
       "--set memory.size_mib=1024 --report /tmp/demo.yaml",
       "wholestore launch -n 2 -- wholestore demo --set memory.location=device"},
      run_demo};
  return info;
}

}  // namespace wholestore::apps
