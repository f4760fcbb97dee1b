/*
 * Output files of the commands (every --report, train's --export and --plot): one home for how
 * they reach the disk.  A file is written whole under a temporary name in its own directory,
 * flushed, and renamed over the destination, never truncated in place: a write that fails (a
 * full disk, a file size limit, a directory that became read-only) leaves no partial file and
 * keeps the previous file of that name byte for byte.
 */
#pragma once

#include <cstdio>
#include <functional>
#include <string>

namespace wholestore::apps {

/// Writes `path` with `fill`, which writes the contents to the stream it is given (fwrite and
/// friends; a failed write is found through ferror, so `fill` need not check each call).
///
/// A new name or a regular file (through a symbolic link too, which stays a link): written to
/// `.NAME.tmp-PID-N` in the same directory (mode 0666 less the umask for a new file, the old
/// file's mode for a replaced one), flushed to disk, renamed over `path`.  Anything else already
/// under that name (a device such as /dev/null or /dev/stdout, a FIFO) is written in place, as
/// it cannot be replaced.  `what` names the output in messages ("--export").
///
/// Throws config_error naming `what`, `path` and the reason when the file cannot be written; the
/// temporary file is removed then (also when `fill` throws, which is rethrown) and a previous
/// file of that name is left as it was.
void write_output_file(const std::string& path, const std::string& what,
                       const std::function<void(std::FILE*)>& fill);

/// write_output_file of a text held in memory.
void write_output_file(const std::string& path, const std::string& what,
                       const std::string& contents);

}  // namespace wholestore::apps
