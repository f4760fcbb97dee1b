// File IO of WholeMemory: store and load as phases with an agreement between the ranks after
// each (file_io.hpp states the contract, file_format.hpp the format, file_agreement.hpp the
// agreement, file_store.hpp and file_load.hpp the steps, file_transfer.hpp how a rank moves
// its bytes).
#include <wholememory/file_io.hpp>

#include "file_agreement.hpp"
#include "file_format.hpp"
#include "file_load.hpp"
#include "file_store.hpp"
#include "file_transfer.hpp"

#include <wholememory/error.hpp>

#include <chrono>
#include <filesystem>
#include <set>

namespace wholememory {

namespace {

namespace fs = std::filesystem;

// The communicator of a call: that of the first array with memory.  Checked locally, before
// any exchange, since without it there is no one to agree with.
template <typename Array>
communicator& call_communicator(const std::vector<Array>& arrays, const char* what) {
  for (const Array& a : arrays) {
    if (a.memory != nullptr && *a.memory) return a.memory->comm();
  }
  WM_FAIL(logic_error, "wholememory::" << what << ": no array has memory (" << arrays.size()
                                       << " arrays given); pass at least one");
}

// Checks what one rank can check alone: names, memory handles, one communicator.
template <typename Array>
void check_arrays(const std::vector<Array>& arrays, const communicator& comm) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const Array& a = arrays[i];
    WM_EXPECTS(detail::is_plain_name(a.name) && a.name.size() <= detail::max_array_name_length,
               "array " << i << ": name '" << a.name << "' is not [A-Za-z0-9_.-]+ of at most "
                        << detail::max_array_name_length << " characters");
    WM_EXPECTS(names.insert(a.name).second, "array name '" << a.name << "' is given twice");
    WM_EXPECTS(a.memory != nullptr && *a.memory,
               "array '" << a.name << "' has no memory (null or empty handle)");
    WM_EXPECTS(&a.memory->comm() == &comm,
               "array '" << a.name << "' lives on another communicator than array '"
                         << arrays[0].name << "'; all arrays of one call share a communicator");
  }
}

// "dir" without trailing slashes, so that "<dir>.tmp-..." is its sibling.
std::string normalized_dir(const std::string& dir) {
  WM_EXPECTS(!dir.empty(), "the store directory is an empty path");
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  WM_EXPECTS(d != "/" && d != "." && d != ".." && fs::path(d).filename() != "." &&
                 fs::path(d).filename() != "..",
             "the store directory '" << dir << "' does not name a directory that can be replaced");
  return d;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void store(const std::vector<stored_array>& arrays, const std::string& dir,
           const file_io_options& options, file_io_stats* stats) {
  const auto start = std::chrono::steady_clock::now();
  communicator& comm = call_communicator(arrays, "store");
  bootstrap& bs = comm.get_bootstrap();
  const std::string call = "wholememory::store(" + dir + ")";
  const std::uint64_t block_bytes =
      options.block_bytes == 0 ? default_block_bytes : options.block_bytes;

  std::string target;
  // Named without the directory until the ranks agree on it, so the message is the same.
  const auto arguments = detail::agree(bs, "wholememory::store", "checking its arguments", [&] {
    check_arrays(arrays, comm);
    target = normalized_dir(dir);
    WM_EXPECTS(block_bytes % 8 == 0,
               "block_bytes " << block_bytes << " is not a positive multiple of 8");
    for (const auto& [key, value] : options.metadata) {
      WM_EXPECTS(detail::is_plain_name(key), "metadata key '" << key << "' is not [A-Za-z0-9_.-]+");
      WM_EXPECTS(value.find_first_of("\r\n") == std::string::npos,
                 "metadata value of '" << key << "' is not one line");
    }
    detail::call_arguments a;
    a.dir = target;
    a.block_bytes = block_bytes;
    a.metadata_checksum = detail::metadata_checksum(options.metadata);
    for (const stored_array& s : arrays) a.arrays.emplace_back(s.name, s.memory->size());
    return a.encode();
  });
  detail::check_same_arguments(arguments, "wholememory::store");

  // The temporary directory's name is known on every rank before rank 0 makes it (the
  // barrier: every rank has received it), so that the ranks that survive a failure, rank 0's
  // death included, remove it.
  std::string temp;
  try {
    temp = detail::agree(bs, call, "choosing the temporary directory", [&] {
      return comm.rank() == 0 ? detail::temp_store_name(target) : std::string();
    })[0];
    bs.barrier();
    detail::agree(bs, call, "preparing the temporary directory", [&] {
      if (comm.rank() == 0) detail::prepare_store(temp, arrays);
      return std::string();
    });
    const auto checksums = detail::agree(bs, call, "writing its parts", [&] {
      return detail::write_own_parts(arrays, temp, block_bytes, options);
    });
    detail::agree(bs, call, "committing the store", [&] {
      if (comm.rank() == 0) {
        detail::commit_store(detail::combine_checksums(arrays, block_bytes, options, checksums),
                             temp, target);
      }
      return std::string();
    });
  } catch (...) {
    // The old store at `target` is untouched, or already replaced by the complete new one (then
    // `temp` holds the old one); either way `temp` goes.
    if (!temp.empty()) detail::remove_tree(temp);
    throw;
  }
  if (stats != nullptr) {
    stats->seconds = seconds_since(start);
    stats->bytes = 0;
    for (const stored_array& a : arrays) {
      for (const detail::owned_range& r : detail::owned_ranges(*a.memory)) stats->bytes += r.bytes;
    }
  }
}

void load(const std::vector<loaded_array>& arrays, const std::string& dir,
          const file_io_options& options, file_io_stats* stats) {
  const auto start = std::chrono::steady_clock::now();
  communicator& comm = call_communicator(arrays, "load");
  bootstrap& bs = comm.get_bootstrap();
  const std::string call = "wholememory::load(" + dir + ")";

  const auto arguments = detail::agree(bs, "wholememory::load", "checking its arguments", [&] {
    check_arrays(arrays, comm);
    WM_EXPECTS(!dir.empty(), "the store directory is an empty path");
    detail::call_arguments a;
    a.dir = dir;
    a.verify = options.verify ? 1 : 0;
    for (const loaded_array& l : arrays) a.arrays.emplace_back(l.name, l.memory->size());
    return a.encode();
  });
  detail::check_same_arguments(arguments, "wholememory::load");

  detail::load_plan plan;
  const auto manifests = detail::agree(bs, call, "reading the manifest", [&] {
    plan = detail::plan_load(arrays, dir);
    return detail::hex64(plan.manifest_checksum);
  });
  for (std::size_t r = 1; r < manifests.size(); ++r) {
    if (manifests[r] != manifests[0]) {
      WM_FAIL(mismatch_error, call << ": rank " << r << " reads a different manifest than rank 0 "
                                   << "(checksum " << manifests[r] << ", not " << manifests[0]
                                   << "): is the directory not shared between hosts, or was the "
                                      "store replaced during the load?");
    }
  }

  const unsigned threads = detail::io_threads(options.threads);
  detail::progress_meter meter(options.progress,
                               plan.own_bytes + (options.verify ? plan.verify_bytes : 0));
  if (options.verify) {
    detail::agree(bs, call, "verifying the checksums", [&] {
      detail::verify_own_blocks(plan, dir, threads, meter);
      return std::string();
    });
  }
  detail::agree(bs, call, "reading its parts", [&] {
    detail::read_own_parts(plan, dir, threads, meter);
    meter.report();
    return std::string();
  });
  if (stats != nullptr) {
    stats->seconds = seconds_since(start);
    stats->bytes = plan.own_bytes;
  }
}

void store(const allocation& memory, const std::string& dir, const file_io_options& options,
           file_io_stats* stats) {
  store({stored_array{"data", &memory}}, dir, options, stats);
}

void load(allocation& memory, const std::string& dir, const file_io_options& options,
          file_io_stats* stats) {
  load({loaded_array{"data", &memory}}, dir, options, stats);
}

}  // namespace wholememory
