/*
 * Private to file IO: the steps of load.  Every rank checks the requested arrays against the
 * manifest and the files on disk, then (with verify) reads every block that overlaps its own
 * parts and compares its checksum, then reads its own parts into memory.  None of these is
 * collective: file_io.cpp runs them between agreements, so no destination byte is written
 * before every rank has passed every check.
 */
#pragma once

#include "file_transfer.hpp"

#include <wholememory/file_io.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wholememory::detail {

/// What one load moves on this rank: per requested array, its manifest entry, its file (open
/// from the start, so that both passes read the file that was checked even if a store
/// replaces the directory meanwhile), this rank's parts and the block intervals [first, last]
/// overlapping them.
struct load_plan {
  std::uint64_t manifest_checksum = 0;
  std::vector<stored_manifest::array> entries;
  std::vector<unique_fd> files;
  std::vector<std::vector<owned_range>> ranges;
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> blocks;
  std::uint64_t own_bytes = 0;
  std::uint64_t verify_bytes = 0;
};

/// Reads the manifest of `dir`, finds the requested arrays in it and opens their files, all
/// from one open directory.  Throws logic_error for a missing or corrupt manifest, an array
/// the store does not hold (listing those it holds), a byte size that differs from the
/// destination's, a missing, truncated or too long file.
load_plan plan_load(const std::vector<loaded_array>& arrays, const std::string& dir);

/// Reads every block overlapping this rank's parts on `threads` threads and compares its
/// checksum with the manifest's.  Throws logic_error naming the file and the first bad block.
void verify_own_blocks(const load_plan& plan, const std::string& dir, unsigned threads,
                       progress_meter& meter);

/// Reads this rank's parts from the files into memory (device memory through staging).
void read_own_parts(const load_plan& plan, const std::string& dir, unsigned threads,
                    progress_meter& meter);

}  // namespace wholememory::detail
