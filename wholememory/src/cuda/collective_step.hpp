/*
 * Collective-safe local steps.
 *
 * A collective operation (allocating device memory over the ranks, creating a communicator)
 * is a sequence of local steps separated by bootstrap exchanges.  If one rank fails in a local
 * step and simply throws, the others block in the next exchange until the bootstrap times
 * out.  collective_step runs the local step, then every rank allgathers whether it succeeded
 * (and the error text), and when any rank failed, every rank throws the same kind of
 * exception with every failing rank's message.  Internal to src/cuda/.
 */
#pragma once

#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace wholememory::detail {

/// Runs `local` on this rank; then, collectively over `bs`, throws on every rank when any
/// rank's `local` threw: "<what> failed: rank 1: <message>; rank 3: <message>", with the
/// exception type of the lowest failing rank.  Collective over `bs`.
template <typename LocalStep>
void collective_step(bootstrap& bs, const char* what, LocalStep&& local) {
  // First character: the kind of the failure; the rest: its message.  Empty: success.
  std::string status;
  try {
    local();
  } catch (const mismatch_error& e) {
    status = std::string("m") + e.what();
  } catch (const logic_error& e) {
    status = std::string("l") + e.what();
  } catch (const out_of_memory& e) {
    status = std::string("o") + e.what();
  } catch (const std::bad_alloc& e) {
    status = std::string("o") + "host allocation failed: " + e.what();
  } catch (const cuda_error& e) {
    status = std::string("c") + e.what();
  } catch (const nccl_error& e) {
    status = std::string("n") + e.what();
  } catch (const system_error& e) {
    status = std::string("s") + e.what();
  } catch (const timeout_error& e) {
    status = std::string("t") + e.what();
  } catch (const std::exception& e) {
    status = std::string("x") + e.what();
  } catch (...) {
    status = "xunknown exception";
  }
  const std::vector<std::string> all = bs.allgatherv(status);
  char kind = 0;
  std::ostringstream message;
  message << what << " failed on";
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    message << (kind == 0 ? " " : "; ") << "rank " << r << ": " << all[r].substr(1);
    if (kind == 0) kind = all[r][0];
  }
  switch (kind) {
    case 0:
      return;
    case 'm':
      WM_FAIL(::wholememory::mismatch_error, message.str());
    case 'l':
      WM_FAIL(::wholememory::logic_error, message.str());
    case 'o':
      WM_FAIL(::wholememory::out_of_memory, message.str());
    case 'c':
      WM_FAIL(::wholememory::cuda_error, message.str());
    case 'n':
      WM_FAIL(::wholememory::nccl_error, message.str());
    case 's':
      WM_FAIL(::wholememory::system_error, message.str());
    case 't':
      WM_FAIL(::wholememory::timeout_error, message.str());
    default:
      WM_FAIL(std::runtime_error, message.str());
  }
}

}  // namespace wholememory::detail
