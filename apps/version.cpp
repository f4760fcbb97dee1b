// The version block (version.hpp): build facts from the generated headers, machine facts from
// wholememory's describe_cuda_environment.
#include "version.hpp"

#include "build_config.hpp"  // generated at configure time (apps/CMakeLists.txt)
#include "git_commit.hpp"    // generated at build time (cmake/git_commit.cmake)

#include <wholememory/device.hpp>

#include <cstdio>
#include <sstream>
#include <string>

namespace wholestore::apps {

namespace {

#if defined(WHOLESTORE_HAS_CUDA)
constexpr bool cuda_compiled = true;
#else
constexpr bool cuda_compiled = false;
#endif

// 12040 -> "12.4" (CUDA's major * 1000 + minor * 10); 0 -> "".
std::string cuda_version_name(int v) {
  if (v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// 22105 -> "2.21.5" (NCCL >= 2.9: major * 10000 + minor * 100 + patch; older: * 1000); 0 -> "".
std::string nccl_version_name(int v) {
  if (v <= 0) return "";
  const int major_unit = v >= 20900 ? 10000 : 1000;
  return std::to_string(v / major_unit) + "." + std::to_string(v % major_unit / 100) + "." +
         std::to_string(v % 100);
}

std::string gib(std::size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", static_cast<double>(bytes) / (1ull << 30));
  return text;
}

// A YAML double-quoted scalar.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string version_text() {
  const wholememory::cuda_environment env = wholememory::describe_cuda_environment();
  std::ostringstream out;
  out << "wholestore " << WHOLESTORE_VERSION << "\n";
  out << "  commit    " << WHOLESTORE_GIT_COMMIT << "\n";
  out << "  build     " << WHOLESTORE_BUILD_TYPE << ", " << WHOLESTORE_COMPILER << "\n";
  if (!cuda_compiled) {
    out << "  CUDA      not compiled in (host-only build)\n";
    out << "  NCCL      not compiled in\n";
    return out.str();
  }
  out << "  CUDA      " << WHOLESTORE_BUILD_CUDA_VERSION << ", architectures "
      << WHOLESTORE_BUILD_CUDA_ARCHITECTURES << "\n";
  out << "  NCCL      " << WHOLESTORE_BUILD_NCCL_VERSION << "\n";
  out << "  runtime   CUDA driver "
      << (env.driver_version ? cuda_version_name(env.driver_version) : "none") << ", runtime "
      << (env.runtime_version ? cuda_version_name(env.runtime_version) : "none")
      << ", NCCL library " << (env.nccl_version ? nccl_version_name(env.nccl_version) : "none")
      << "\n";
  if (env.gpus.empty()) {
    out << "  GPUs      none visible" << (env.note.empty() ? "" : " (" + env.note + ")") << "\n";
  }
  for (std::size_t i = 0; i < env.gpus.size(); ++i) {
    const auto& g = env.gpus[i];
    out << (i == 0 ? "  GPUs      " : "            ") << g.device << ": " << g.name << ", sm_"
        << g.compute_major << g.compute_minor << ", " << gib(g.memory_bytes) << " GiB, "
        << g.pci_bus_id << "\n";
  }
  return out.str();
}

std::string version_yaml() {
  const wholememory::cuda_environment env = wholememory::describe_cuda_environment();
  std::ostringstream out;
  out << "version:\n";
  out << "  wholestore: " << quoted(WHOLESTORE_VERSION) << "\n";
  out << "  git_commit: " << quoted(WHOLESTORE_GIT_COMMIT) << "\n";
  out << "  build_type: " << quoted(WHOLESTORE_BUILD_TYPE) << "\n";
  out << "  compiler: " << quoted(WHOLESTORE_COMPILER) << "\n";
  out << "  cuda: " << (cuda_compiled ? "true" : "false") << "\n";
  out << "  cuda_version: " << quoted(WHOLESTORE_BUILD_CUDA_VERSION) << "\n";
  out << "  cuda_architectures: " << quoted(WHOLESTORE_BUILD_CUDA_ARCHITECTURES) << "\n";
  out << "  nccl: " << (cuda_compiled ? "true" : "false") << "\n";
  out << "  nccl_version: " << quoted(WHOLESTORE_BUILD_NCCL_VERSION) << "\n";
  out << "  cuda_driver: " << quoted(cuda_version_name(env.driver_version)) << "\n";
  out << "  cuda_runtime: " << quoted(cuda_version_name(env.runtime_version)) << "\n";
  out << "  nccl_library: " << quoted(nccl_version_name(env.nccl_version)) << "\n";
  out << "  gpus:" << (env.gpus.empty() ? " []" : "") << "\n";
  for (const auto& g : env.gpus) {
    out << "    - {device: " << g.device << ", name: " << quoted(g.name)
        << ", compute_capability: \"" << g.compute_major << "." << g.compute_minor
        << "\", memory_gib: " << gib(g.memory_bytes) << ", pci_bus_id: " << quoted(g.pci_bus_id)
        << "}\n";
  }
  if (!env.note.empty()) out << "  gpu_note: " << quoted(env.note) << "\n";
  return out.str();
}

}  // namespace wholestore::apps
