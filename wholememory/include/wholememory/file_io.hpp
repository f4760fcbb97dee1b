/*
 * File IO of WholeMemory: a directory holding named arrays, each the flat byte image of an
 * allocation, written and read by every rank in parallel.
 *
 * Format (docs/architecture.md, "File IO"): `dir/manifest`, a small "key: value" text file
 * (format version, the arrays' names, files, sizes, checksum block size and block checksums,
 * the caller's metadata, and a checksum of the manifest itself on its last line), and one file
 * `dir/<name>.bin` per array holding its bytes in order.  A file does not depend on the
 * allocation's type, location, partition or rank count, so a store may be loaded into any
 * allocation of the same byte size (resharding).  Block checksums cover fixed blocks of
 * `block_bytes` bytes (the last one shorter), so a rank verifies only the blocks that overlap
 * its own bytes.
 *
 * store and load are collective over the arrays' communicator: every rank calls them with the
 * same array list (names and byte sizes), directory, metadata and options, and every rank
 * writes or reads only its own parts (pwrite / pread at their offsets, `threads` threads per
 * rank, all ranks at once).  Device memory goes through a page-locked host staging buffer
 * per thread with synchronous cudaMemcpy (on the legacy default stream, so it also waits for
 * the caller's blocking streams); no stream is passed or synchronized otherwise, so finish
 * writing the memory before store and do not use it before load returns.  Both return after
 * every rank has finished, so continuous and chunked memory is complete on every rank when
 * load returns.
 *
 * Errors agree across ranks: after each phase the ranks exchange success or failure over the
 * bootstrap, and when one failed every rank throws the same message naming the first failing
 * rank and its reason, with that rank's exception type (logic_error for bad arguments, missing
 * or corrupt files; mismatch_error when ranks disagree; system_error for failed system calls;
 * std::runtime_error for anything else, such as an exception thrown by `progress`).  A rank
 * that dies makes the others fail with timeout_error.  The ranks wait for each other at the end
 * of every phase under the bootstrap's timeout (WHOLESTORE_TIMEOUT, 300 s by default), so a
 * rank that ends a phase that much later than the first one (very uneven parts, a slow
 * shared disk) fails the call too: raise the timeout for such stores.
 *
 * Atomicity of store: the arrays are written into a fresh sibling `<dir>.tmp-<unique>`, synced,
 * then rank 0 writes the manifest last and swaps the new directory in for `dir` in one rename
 * (renameat2 RENAME_EXCHANGE when `dir` exists, the old one then removed).  Whatever fails
 * (an exception on any rank, a full disk, a dead rank), `dir` is either the old store,
 * untouched, or the complete new one, never a mix; the surviving ranks remove the temporary
 * directory.  Only when every rank is killed can a `<dir>.tmp-*` sibling remain; it never has
 * the name `dir`.  If rank 0 dies between its swap and the final agreement, the others report
 * a failure although `dir` already holds the complete new store.  On a file system without
 * RENAME_EXCHANGE the old store is renamed aside first, so `dir` is briefly missing (never
 * incomplete).  An existing `dir` is replaced only when it is empty or holds a store.
 *
 * Checks of load, all before any destination byte is written: the manifest (strictly parsed),
 * every requested array present with exactly the destination's byte size, each file's size
 * on disk, and, with `verify`, the checksum of every block that overlaps this rank's bytes.
 * That costs reading those bytes twice, once to verify and once to copy (the second read
 * usually from the page cache), but never holds more than a few chunk buffers per thread.
 * The manifest and the files are opened once, through one directory handle, so a store that
 * replaces `dir` meanwhile cannot make the copy pass read other files than the verify pass.
 * Only an IO error in the copy pass, or a file modified in place between the passes, can leave
 * the destination partly written; it then fails on every rank like any other error.
 */
#pragma once

#include <wholememory/allocation.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace wholememory {

/// Version of the store format this build writes and reads.
constexpr int stored_format_version = 1;
/// Checksum block size when file_io_options::block_bytes is 0.
constexpr std::uint64_t default_block_bytes = std::uint64_t{16} << 20;

/// One named array of a store: its bytes are those of `memory` (any type x location).
struct stored_array {
  std::string name;  ///< [A-Za-z0-9_.-]+, at most 200 characters, unique in the store
  const allocation* memory = nullptr;
};

/// One array to load: the stored array `name` is copied into `memory`, which must have the
/// stored byte size (any type x location, partition and rank count).
struct loaded_array {
  std::string name;
  allocation* memory = nullptr;
};

/// Options of store and load.
struct file_io_options {
  /// IO threads per rank (0: up to 4, at most the hardware's threads).
  unsigned threads = 0;
  /// Called on the calling thread, never concurrently, with the bytes this rank has moved so
  /// far and in all (load with verify counts the verify pass and the copy pass), ending with
  /// done == total.  An exception it throws aborts the call on every rank.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
  /// store: written to the manifest.  Keys [A-Za-z0-9_.-]+, values one line (no CR or LF).
  std::map<std::string, std::string> metadata;
  /// load: check the checksums of this rank's blocks before writing any destination byte.
  bool verify = true;
  /// store: checksum block size in bytes, a positive multiple of 8 (0: default_block_bytes).
  std::uint64_t block_bytes = 0;
};

/// What one call did on this rank.
struct file_io_stats {
  double seconds = 0;       ///< wall time of the whole call, agreement steps included
  std::uint64_t bytes = 0;  ///< bytes of this rank's own parts of the arrays
};

/// The manifest of a store, as read_stored_manifest parses it.
struct stored_manifest {
  int version = 0;
  std::map<std::string, std::string> metadata;
  struct array {
    std::string name, file;  ///< file: name of the array's file inside the store directory
    std::uint64_t bytes = 0, block_bytes = 0;
    /// Checksum of block i, bytes [i * block_bytes, min((i + 1) * block_bytes, bytes)).
    std::vector<std::uint64_t> block_checksums;
  };
  std::vector<array> arrays;  ///< in the order they were stored
};

/// Writes `arrays` into the store directory `dir`, replacing an existing store there
/// atomically (see the header comment); creates missing parent directories.  Collective over
/// the arrays' communicator: all arrays on one communicator, the same list (names, sizes),
/// `dir`, metadata and block_bytes on every rank, else mismatch_error on every rank naming
/// the rank and the difference.  Throws logic_error for invalid names or metadata, a `dir` that
/// exists and is neither empty nor a store, system_error when the file system refuses.
void store(const std::vector<stored_array>& arrays, const std::string& dir,
           const file_io_options& options = {}, file_io_stats* stats = nullptr);

/// Reads the arrays named in `arrays` from the store `dir` into their memory (the store may
/// hold more arrays).  Collective like store.  Throws logic_error, without writing any
/// destination byte, for a missing or corrupt manifest, an array the store does not hold, a
/// byte size that differs from the stored one, a file of the wrong size, a block whose
/// checksum does not match (naming file and block); mismatch_error when ranks disagree.
void load(const std::vector<loaded_array>& arrays, const std::string& dir,
          const file_io_options& options = {}, file_io_stats* stats = nullptr);

/// store with one array named "data".
void store(const allocation& memory, const std::string& dir, const file_io_options& options = {},
           file_io_stats* stats = nullptr);

/// load of the array named "data".
void load(allocation& memory, const std::string& dir, const file_io_options& options = {},
          file_io_stats* stats = nullptr);

/// Parses `dir/manifest`.  Local (not collective); reads only the manifest.  Throws
/// logic_error naming the file and line when it is missing, truncated, edited or malformed.
stored_manifest read_stored_manifest(const std::string& dir);

}  // namespace wholememory
