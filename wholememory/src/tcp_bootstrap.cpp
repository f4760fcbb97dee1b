// TCP bootstrap: not written yet; the thread bootstrap lands first.
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

namespace wholememory {

std::unique_ptr<bootstrap> make_tcp_bootstrap(int, int, const std::string&, int,
                                              std::chrono::milliseconds) {
  WM_FAIL(logic_error, "make_tcp_bootstrap is not implemented yet");
}

}  // namespace wholememory
