#!/usr/bin/env bash
# The installed package as a user meets it: installs the build tree into WORK/install, checks
# that only public headers went in, configures tests/consumer against it (find_package), builds
# and runs it.  Usage:
#   consumer_test.sh CMAKE BUILD_DIR WORK_DIR GENERATOR CXX_COMPILER BUILD_TYPE [CMAKE_ARGS...]
# (the CTest test package.consumer passes the build's own values).
set -euo pipefail

if [ $# -lt 6 ]; then
  echo "usage: $0 CMAKE BUILD_DIR WORK_DIR GENERATOR CXX_COMPILER BUILD_TYPE [CMAKE_ARGS...]" >&2
  exit 2
fi
cmake=$1 build_dir=$2 work=$3 generator=$4 cxx=$5 build_type=$6
shift 6
source_dir=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$source_dir/../.." && pwd)

rm -rf "$work"
mkdir -p "$work"
prefix=$work/install

echo "==== cmake --install $build_dir --prefix $prefix"
"$cmake" --install "$build_dir" --prefix "$prefix" --config "$build_type" >"$work/install.log"

# Exactly the headers of the layers' include/ trees, nothing from src/.
expected=$(cd "$repo" && for layer in wholememory graph embedding train; do
  (cd "$layer/include" && find . -type f)
done | sort)
installed=$(cd "$prefix/include/wholestore" && find . -type f | sort)
if [ "$expected" != "$installed" ]; then
  echo "FAIL: installed headers differ from the public include/ trees:" >&2
  diff <(printf '%s\n' "$expected") <(printf '%s\n' "$installed") >&2 || true
  exit 1
fi
echo "ok: $(printf '%s\n' "$installed" | wc -l) public headers installed, no internal ones"

echo "==== configure tests/consumer against $prefix"
"$cmake" -S "$source_dir" -B "$work/build" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE="$build_type" "$@" >"$work/configure.log" ||
  { cat "$work/configure.log" >&2; exit 1; }

echo "==== build"
"$cmake" --build "$work/build" --config "$build_type" >"$work/build.log" ||
  { cat "$work/build.log" >&2; exit 1; }

echo "==== run"
consumer=$work/build/wholestore_consumer
[ -x "$consumer" ] || consumer=$work/build/$build_type/wholestore_consumer  # multi-config
"$consumer"
