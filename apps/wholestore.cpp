// The wholestore program: the command table and dispatch are in cli.cpp, so that tests reach
// the same commands, help and schemas.
#include "cli.hpp"

int main(int argc, char** argv) { return wholestore::apps::run_wholestore(argc, argv); }
