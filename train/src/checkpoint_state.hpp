/*
 * The trainer's checkpoint directory (train_settings::checkpoint_dir, resume_dir): DIR/state.txt
 * names the last stored epoch N, the settings the embeddings' bits depend on and the loss
 * curve; DIR/epoch-N/{input,output} are the two tables' checkpoints (embedding/checkpoint.hpp).
 * state.txt is written beside and renamed into place, so it always names a complete epoch; it
 * is read strictly (every line a known key with a value in range, the curve one line per epoch
 * in order), since a resume trusts it.  Internal to train/; plain C++, host only.
 */
#pragma once

#include <train/trainer.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::train::detail {

namespace fs = std::filesystem;

// What state.txt holds.
struct saved_state {
  int format = 2;  // 1: written before the settings were recorded (settings stays empty)
  int epoch = 0;
  std::uint64_t nodes = 0, dim = 0;
  std::string mode;
  // saved_settings of the run that stored it (format 2), in that order: name, value as text.
  std::vector<std::pair<std::string, std::string>> settings;
  std::vector<epoch_record> curve;
};

// The settings besides dim and mode that a checkpoint's bits depend on, as state.txt records
// them: seed, lr, min_lr_fraction, optimizer, walk_length, window, walks_per_node, p, q,
// negatives, negative_distribution, batch_size.  Numbers in their shortest exact form.
std::vector<std::pair<std::string, std::string>> saved_settings(const train_settings& s);

// Before a resume from `dir`: throws logic_error naming the first setting of saved_settings(s)
// that differs from the checkpoint's state `st`, with both values (the same bits are promised
// only for the same settings).  A format-1 state records none and is not compared.
void check_resume_settings(const std::string& dir, const saved_state& st, const train_settings& s);

// Writes DIR/state.txt (through DIR/state.txt.tmp and a rename).  Throws logic_error when the
// file cannot be written.
void write_state(const std::string& dir, const saved_state& st);

// Reads DIR/state.txt.  Throws logic_error when there is none or it is not a train state: an
// unknown or repeated key, a value out of range (an epoch past 2^31 - 1, a garbage curve line),
// the message naming the file and the line.
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
