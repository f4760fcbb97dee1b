/*
 * Private to file IO: the on-disk format of a store, its block checksum and its manifest.
 *
 * Block checksum.  An array is read as little-endian 64-bit words w_i = bytes [8i, 8i + 8)
 * (the last word zero-padded when the size is not a multiple of 8).  Block b of B bytes holds
 * the words of bytes [bB, min((b + 1)B, size)) and its checksum is
 *
 *     fmix64((sum over its words of fmix64(w_i ^ (i * K + C)) mod 2^64) ^ block_length)
 *
 * with fmix64 the MurmurHash3 finalizer, K = 0x9e3779b97f4a7c15, C = 0x5851f42d4c957f2d.
 * fmix64 is a bijection, so changing any one word changes its term and the checksum; the key
 * i * K + C ties each word to its position, so moved or swapped data is caught too; two or
 * more changed words cancel with probability about 2^-64.  Being a sum, the checksum of a
 * block is the sum of the terms of any split of its words: a block that spans two ranks'
 * parts is checksummed by each rank over the whole words it holds, and the few words that
 * straddle a part boundary (at most one per boundary) are assembled from the ranks' edge
 * bytes.  That is why it is a sum and not a streaming hash: no rank reads another rank's
 * bytes back from the file, and threads checksum chunks in any order.  Two multiplies per 8
 * bytes: 5 to 6 GB/s on one core of the development VM.
 *
 * Manifest.  Text, one "key: value" per line, in this order: the line "# wholememory store",
 * "format_version: 1", "arrays: N", per array i "array.<i>.name", ".file", ".bytes",
 * ".block_bytes", ".block_checksums" (0x-prefixed 16-digit hex numbers separated by single
 * spaces), "metadata.<key>" lines, and last "manifest_checksum: 0x...", the block checksum of
 * every byte before that line taken as one block.  Parsing is strict: unknown or repeated
 * keys, missing fields, counts that do not add up and a missing or wrong manifest_checksum
 * (a truncated or edited file) are errors naming the file and line.
 */
#pragma once

#include "posix.hpp"
#include <wholememory/file_io.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace wholememory::detail {

constexpr const char* manifest_file_name = "manifest";
constexpr const char* manifest_magic_line = "# wholememory store";
constexpr std::size_t max_array_name_length = 200;

/// MurmurHash3's 64-bit finalizer: a bijection that mixes every input bit into every output.
inline std::uint64_t fmix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

constexpr std::uint64_t checksum_word_key = 0x9e3779b97f4a7c15ull;
constexpr std::uint64_t checksum_word_offset = 0x5851f42d4c957f2dull;

/// The little-endian 64-bit value of 8 bytes at `p`.
inline std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t w;
  std::memcpy(&w, p, sizeof(w));
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  w = __builtin_bswap64(w);
#endif
  return w;
}

/// The term of word `index` holding `word`.
inline std::uint64_t checksum_term(std::uint64_t word, std::uint64_t index) {
  return fmix64(word ^ (index * checksum_word_key + checksum_word_offset));
}

/// Adds the terms of the words in bytes [offset, offset + bytes) of an array of `total` bytes,
/// read from `data` (which holds byte `offset`), to the sums of their blocks: sums[k] is block
/// first_block + k.  `offset` is a multiple of 8, and so is offset + bytes unless it is
/// `total` (the short last word, zero-padded).
void add_checksum_terms(const void* data, std::uint64_t offset, std::uint64_t bytes,
                        std::uint64_t total, std::uint64_t block_bytes, std::uint64_t first_block,
                        std::uint64_t* sums);

/// The checksum of a block from the sum of its terms and its length.
inline std::uint64_t finish_block_checksum(std::uint64_t sum, std::uint64_t block_length) {
  return fmix64(sum ^ block_length);
}

/// The checksum of `bytes` bytes at `data` taken as one block at offset 0.
std::uint64_t checksum_of(const void* data, std::size_t bytes);

/// Number of blocks of an array: ceil(bytes / block_bytes).
inline std::uint64_t block_count(std::uint64_t bytes, std::uint64_t block_bytes) {
  return bytes / block_bytes + (bytes % block_bytes != 0);
}

/// True for [A-Za-z0-9_.-]+ (array names, metadata keys).
bool is_plain_name(const std::string& s);

/// "0x" and 16 hex digits.
std::string hex64(std::uint64_t v);

/// The manifest's text for `m`, manifest_checksum line included.
std::string format_manifest(const stored_manifest& m);

/// A parsed manifest and its manifest_checksum (which identifies its contents).
struct parsed_manifest {
  stored_manifest manifest;
  std::uint64_t checksum = 0;
};

/// Parses manifest text read from `path` (named in errors).  Throws logic_error naming
/// `path` and the line.
parsed_manifest parse_manifest(const std::string& path, const std::string& text);

/// Opens the store directory `dir` (O_DIRECTORY) so that the manifest and the files are read
/// from one directory even if a store replaces it meanwhile.  Throws logic_error.
unique_fd open_store_directory(const std::string& dir);

/// Reads and parses the manifest of the directory open as `dir_fd` (named `dir` in messages).
/// Throws logic_error when it is missing or malformed, system_error when reading fails.
parsed_manifest read_manifest_at(int dir_fd, const std::string& dir);

/// The same for the directory `dir`.
parsed_manifest read_manifest_file(const std::string& dir);

}  // namespace wholememory::detail
