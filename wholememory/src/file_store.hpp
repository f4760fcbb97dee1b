/*
 * Private to file IO: the steps of store.  Rank 0 makes a temporary directory next to the
 * target holding every array's file at its final size; every rank writes its own parts and
 * the checksum sums of their blocks; rank 0 combines the sums, writes the manifest last and
 * swaps the directory in for the target.  None of these is collective: file_io.cpp runs them
 * between agreements.
 */
#pragma once

#include <wholememory/file_io.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace wholememory::detail {

/// Rank 0: checks that `dir` may be replaced (absent, an empty directory or a store), creates
/// its missing parents and returns the name of the store's temporary directory,
/// `<dir>.tmp-<unique>`, which does not exist yet: every rank learns the name before the
/// directory exists, so whichever rank survives a failure can remove it.  Throws logic_error,
/// system_error.
std::string temp_store_name(const std::string& dir);

/// Rank 0: creates the temporary directory `temp` (temp_store_name) and every array's file
/// there at its full size (reserved with fallocate where the file system can, so that a full
/// disk shows before anyone writes).  Throws system_error.
void prepare_store(const std::string& temp, const std::vector<stored_array>& arrays);

/// Every rank: writes its own parts of every array into the files in `temp` (pwrite at their
/// offsets on options.threads threads, then fdatasync) and returns, encoded, the sums of the
/// blocks its whole words fall in and the bytes of the words it shares with its neighbours.
std::string write_own_parts(const std::vector<stored_array>& arrays, const std::string& temp,
                            std::uint64_t block_bytes, const file_io_options& options);

/// Rank 0: the store's manifest, from every rank's write_own_parts result in rank order.
stored_manifest combine_checksums(const std::vector<stored_array>& arrays,
                                  std::uint64_t block_bytes, const file_io_options& options,
                                  const std::vector<std::string>& payloads);

/// Rank 0: writes the manifest into `temp`, syncs it and the directory, puts `temp` in place
/// of `dir` (renameat2 RENAME_EXCHANGE, or a plain rename when `dir` does not exist), syncs
/// the parent and removes the old store.
void commit_store(const stored_manifest& m, const std::string& temp, const std::string& dir);

/// Removes a directory tree, tolerating other ranks removing it at the same time.  Never
/// throws (it runs on error paths); logs what it could not remove.
void remove_tree(const std::string& path);

}  // namespace wholememory::detail
