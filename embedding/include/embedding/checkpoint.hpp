/*
 * Checkpoints of embedding tables: the weights, every optimizer state array and the step
 * counter, stored through the memory layer's file IO (wholememory/file_io.hpp) into one store
 * directory, and loaded back into a table of the same shape.
 *
 * A checkpoint is a wholememory store whose arrays are "weights" and the state arrays by their
 * names ("m", "v", "sum", "square_avg"), with metadata naming the format, rows, dim, dtype,
 * optimizer, state names and step.  Each array is the flat row-major image of the table, so a
 * checkpoint loads into a table of any rank count, memory type and location (resharding), and
 * training resumed from it continues bit for bit as if it had not stopped (the update of a row
 * depends only on its weights, its state, the summed gradient and the step).
 *
 * Both calls are collective over the table's communicator and synchronous; the caller finishes
 * its GPU work on the table first.  store_checkpoint replaces an existing checkpoint at `dir`
 * atomically: an interrupted store leaves the old one complete.  load_checkpoint checks, before
 * any byte of the table changes and on every rank, that the checkpoint's rows, dim, dtype,
 * optimizer and state arrays are the table's (logic_error naming the field and both values),
 * and then the file IO's own checks (sizes, checksums of every block a rank reads); a failure
 * leaves the table, its state and its step unchanged on every rank.
 */
#pragma once

#include <embedding/table.hpp>
#include <wholememory/file_io.hpp>

#include <string>

namespace wholestore::embedding {

/// Name of the format in a checkpoint's metadata ("wholestore-embedding").
extern const char* const checkpoint_format;

/// Stores `t` into the store directory `dir`.  Collective.  Throws as wholememory::store.
void store_checkpoint(table& t, const std::string& dir,
                      const wholememory::file_io_options& options = {},
                      wholememory::file_io_stats* stats = nullptr);

/// Loads the checkpoint at `dir` into `t` and sets its step.  Collective.  Throws logic_error
/// (nothing changed) for a directory that is not an embedding checkpoint or one of another
/// shape, dtype or optimizer, and as wholememory::load.
void load_checkpoint(table& t, const std::string& dir,
                     const wholememory::file_io_options& options = {},
                     wholememory::file_io_stats* stats = nullptr);

}  // namespace wholestore::embedding
