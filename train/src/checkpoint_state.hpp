/*
 * The trainer's checkpoint directory (train_settings::checkpoint_dir, resume_dir): DIR/state.txt
 * names the last stored epoch N and keeps the loss curve; DIR/epoch-N/{input,output} are the
 * two tables' checkpoints (embedding/checkpoint.hpp).  state.txt is written beside and renamed
 * into place, so it always names a complete epoch.  Internal to train/; plain C++, host only.
 */
#pragma once

#include <train/trainer.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace wholestore::train::detail {

namespace fs = std::filesystem;

// What state.txt holds.
struct saved_state {
  int epoch = 0;
  std::uint64_t nodes = 0, dim = 0;
  std::string mode;
  std::vector<epoch_record> curve;
};

// Writes DIR/state.txt (through DIR/state.txt.tmp and a rename).  Throws logic_error when the
// file cannot be written.
void write_state(const std::string& dir, const saved_state& st);

// Reads DIR/state.txt.  Throws logic_error when there is none or it is not a train state.
saved_state read_state(const std::string& dir);

// DIR/epoch-N: where epoch N's tables are stored.
std::string epoch_dir(const std::string& dir, int epoch);

// "epoch-" and decimal digits: the name of an epoch's tables.
bool is_epoch_name(const std::string& name);

// An epoch directory as store() writes it: the two tables' stores, or what a killed store of
// them left (their temporary siblings), nothing else.
bool is_our_epoch_dir(const fs::path& path);

// Checks that `dir` is a train checkpoint directory or can become one (missing or empty), and
// returns the epoch its state names (0: none yet).  train owns such a directory: it removes
// older epochs from it, so a directory holding anything else is refused before any change:
// throws logic_error naming what is in the way.
int claim_checkpoint_dir(const std::string& dir);

}  // namespace wholestore::train::detail
