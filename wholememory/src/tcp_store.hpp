/*
 * Private to the TCP bootstrap: rank 0's store (tcp_store.cpp), the server side of the rounds
 * described in tcp_bootstrap.cpp.
 */
#pragma once

#include "tcp_wire.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace wholememory::detail::tcp {

class store_server;
struct store_server_deleter {
  void operator()(store_server* s) const;
};
/// Stops the store and joins its thread when it goes.
using store_server_ptr = std::unique_ptr<store_server, store_server_deleter>;

/// Starts rank 0's store on `listener` (a thread) for a group of `size` ranks: rounds fail
/// after `timeout`, only connect requests with `job_token` are admitted, and `address` is how
/// messages name the store.
store_server_ptr start_store_server(socket_fd listener, int size, std::chrono::milliseconds timeout,
                                    std::string job_token, std::string address);

}  // namespace wholememory::detail::tcp
