#!/usr/bin/env bash
# convert's labelled inputs end to end: an on-disk description of .npy arrays and of csv edges,
# OGB's raw layout (csv and gzip), rows by destination (reverse), what info prints of them, and
# hostile inputs refused with the file, the row and the value, leaving no dataset behind.
# The fixtures (50 nodes) are written and the datasets checked byte for byte by a Python script
# that needs only the standard library.
# Usage: ondisk_cli_test.sh <path-to-wholestore>
set -uo pipefail
bin=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

cat >"$work/fixture.py" <<'EOF'
"""make DIR: the fixture as .npy files, csv edges, descriptions and OGB's layout under DIR;
prints the split as info does and the first train node.  check DATASET in|out ...: each
dataset's arrays equal the fixture's, rows by source (out) or destination (in)."""
import os, random, struct, sys

N, DIM, CLASSES = 50, 3, 4
rng = random.Random(43)
edges = [(rng.randrange(N), rng.randrange(N)) for _ in range(150)] + [(0, N - 1)]
features = [rng.randrange(-16, 16) * 0.25 for _ in range(N * DIM)]
labels = [-1 if v % 6 == 5 else v % CLASSES for v in range(N)]
labelled = [v for v in range(N) if labels[v] >= 0]
rng.shuffle(labelled)
train, valid, test = labelled[:15], labelled[15:22], labelled[22:30]


def npy(path, descr, shape, fmt, values):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    head += " " * ((-(10 + len(head) + 1)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def make(d):
    os.makedirs(d + "/npy", exist_ok=True)
    edge_index = [u for u, _ in edges] + [v for _, v in edges]  # [2, E]
    npy(d + "/npy/edges.npy", "<i8", (2, len(edges)), "q", edge_index)
    npy(d + "/npy/feat.npy", "<f4", (N, DIM), "f", features)
    npy(d + "/npy/labels.npy", "<i8", (N,), "q", labels)
    for name, ids in (("train", train), ("valid", valid), ("test", test)):
        npy(d + "/npy/%s.npy" % name, "<i4", (len(ids),), "i", ids)
    write(d + "/npy/dataset.yaml", "format: wholestore-ondisk 1\nedges: edges.npy\n"
          "node_features: feat.npy\nlabels: labels.npy\nsplit:\n  train: train.npy\n"
          "  valid: valid.npy\n  test: test.npy\n")
    write(d + "/npy/edges.csv", "src,dst\n" + "".join("%d,%d\n" % e for e in edges))
    # A train list that names its first node twice.
    npy(d + "/npy/train_dup.npy", "<i8", (2,), "q", [train[0], train[0]])
    write(d + "/npy/dup.yaml", "format: wholestore-ondisk 1\nedges: edges.npy\n"
          "labels: labels.npy\nsplit:\n  train: train_dup.npy\n")
    write(d + "/npy/csv.yaml", "format: wholestore-ondisk 1\nedges: edges.csv\n"
          "node_features: feat.npy\nlabels: labels.npy\nreverse: true\nsplit:\n  train: train.npy\n"
          "  valid: valid.npy\n  test: test.npy\n")
    o = d + "/ogb"
    write(o + "/raw/edge.csv", "".join("%d,%d\n" % e for e in edges))
    write(o + "/raw/num-node-list.csv", "%d\n" % N)
    write(o + "/raw/node-feat.csv", "".join(
        ",".join("%g" % x for x in features[v * DIM:(v + 1) * DIM]) + "\n" for v in range(N)))
    write(o + "/raw/node-label.csv",
          "".join(("%d" % c if c >= 0 else "nan") + "\n" for c in labels))
    for name, ids in (("train", train), ("valid", valid), ("test", test)):
        write(o + "/split/time/%s.csv" % name, "".join("%d\n" % v for v in ids))
    print("%d train, %d validation, %d test, %d in none" % (len(train), len(valid), len(test),
                                                          N - len(train) - len(valid) - len(test)))
    print(train[0])


def read(path, fmt):
    with open(path, "rb") as f:
        data = f.read()
    return list(struct.unpack("<%d%s" % (len(data) // struct.calcsize(fmt), fmt), data))


def check(ds, direction):
    # (row, neighbor) of each edge; rows keep input order.
    pairs = [(w, u) if direction == "in" else (u, w) for u, w in edges]
    rows, offsets = [], [0]
    for v in range(N):
        rows += [col for row, col in pairs if row == v]
        offsets.append(len(rows))
    split = [3] * N
    for k, ids in enumerate((train, valid, test)):
        for v in ids:
            split[v] = k
    got = {
        "row_offsets": read(ds + "/row_offsets.bin", "q") == offsets,
        "col_indices": read(ds + "/col_indices.bin", "i") == rows,
        "node_features": read(ds + "/node_features.bin", "f") == features,
        "node_labels": read(ds + "/node_labels.bin", "i") == labels,
        "node_split": read(ds + "/node_split.bin", "B") == split,
        "direction": ("direction: %s\n" % direction) in open(ds + "/manifest.yaml").read(),
    }
    bad = [k for k, ok in got.items() if not ok]
    if bad:
        print("FAIL: %s differs from the fixture in %s" % (ds, ", ".join(bad)))
    return not bad


if sys.argv[1] == "make":
    make(sys.argv[2])
else:
    args = sys.argv[2:]
    results = [check(args[i], args[i + 1]) for i in range(0, len(args), 2)]
    sys.exit(0 if all(results) else 1)
EOF
# Python starts slowly on the development VM: twice in all, without site packages.
made=$(python3 -S -E "$work/fixture.py" make "$work") || {
  echo "FAIL: cannot write the fixtures"
  exit 1
}
expected=$(head -1 <<<"$made")  # the split, as info prints it
first_train=$(tail -1 <<<"$made")
convert() { "$bin" convert configs/convert.yaml "$@"; }
checks=("$work/ds1" out "$work/ds2" in "$work/ds3" in)

# The on-disk description: .npy arrays, auto-detected by the .yaml name; info shows the split.
convert --set input="$work/npy/dataset.yaml" --set output="$work/ds1" >"$work/c1.log" 2>&1 ||
  fail "convert dataset.yaml: $(cat "$work/c1.log")"
grep -q "labels     4 classes, 42 of 50 nodes labelled" "$work/c1.log" ||
  fail "convert summary: $(cat "$work/c1.log")"
"$bin" info "$work/ds1" >"$work/i1.log" 2>&1 || fail "info ds1: $(cat "$work/i1.log")"
grep -q "num_classes 4; split: $expected" "$work/i1.log" || fail "info split: $(cat "$work/i1.log")"
grep -q "direction out" "$work/i1.log" || fail "info direction: $(cat "$work/i1.log")"

# csv edges with a header and `reverse: true` in the description: rows by destination.
convert --set input="$work/npy/csv.yaml" --set output="$work/ds2" >"$work/c2.log" 2>&1 ||
  fail "convert csv.yaml: $(cat "$work/c2.log")"
grep -q "header     line 1 skipped" "$work/c2.log" || fail "csv header: $(cat "$work/c2.log")"
"$bin" info "$work/ds2" | grep -q "^in-degree:" || fail "info of an in-edge dataset"

# OGB's raw layout: plain csv, found as a directory, with --set reverse=true.
convert --set input="$work/ogb" --set output="$work/ds3" --set reverse=true >"$work/c3.log" 2>&1 ||
  fail "convert ogb: $(cat "$work/c3.log")"
# ... and gzip-compressed, when this build reads gzip (else refused by name).
gzip -r "$work/ogb"
if out=$(convert --set input="$work/ogb" --set input_format=ogb --set split=time \
  --set output="$work/ds4" 2>&1); then
  checks+=("$work/ds4" out)
else
  grep -q "zlib" <<<"$out" || fail "ogb .gz: neither read nor refused naming zlib: $out"
fi
gunzip -r "$work/ogb"
# Every dataset against the fixture, byte for byte (ds2 and ds3 by destination).
python3 -S -E "$work/fixture.py" check "${checks[@]}" || fail "a dataset differs from its fixture"

# Hostile inputs: exit 1 (2 for a description key that does not exist), one message naming the
# file and where, and no dataset left behind.
refused() {  # refused <rc> <what the message must hold> <convert args...>
  local rc=$1 want=$2
  shift 2
  out=$(convert --set output="$work/bad" "$@" 2>&1)
  local got=$?
  if [ $got -ne "$rc" ] || ! grep -qF -- "$want" <<<"$out"; then
    fail "convert $*: exit $got, expected $rc and '$want' in: $out"
  fi
  [ -e "$work/bad" ] && fail "convert $*: a refused run left $work/bad" && rm -rf "$work/bad"
}
cp -r "$work/npy" "$work/h"
printf '0,1\n1,50\n' >"$work/h/edges.csv"
refused 1 "$work/h/edges.csv:2: destination id 50 is outside [0, num_nodes = 50)" \
  --set input="$work/h/csv.yaml"
refused 1 "$work/h/train_dup.npy, row 1: node $first_train is listed twice in train" \
  --set input="$work/h/dup.yaml"
printf 'garbage' >"$work/h/labels.npy"
refused 1 "$work/h/labels.npy: not a .npy file" --set input="$work/h/dataset.yaml"
printf 'format: wholestore-ondisk 2\nedges: edges.npy\n' >"$work/h/v2.yaml"
refused 1 "format 'wholestore-ondisk 2' is not read" --set input="$work/h/v2.yaml"
printf 'format: wholestore-ondisk 1\nedges: edges.npy\nlables: labels.npy\n' >"$work/h/typo.yaml"
refused 2 "$work/h/typo.yaml:3" --set input="$work/h/typo.yaml"
refused 1 "weights" --set input="$work/npy/dataset.yaml" --set weights=true
refused 1 "own features" --set input="$work/npy/dataset.yaml" --set features_dim=8
printf '5\n' >"$work/ogb/split/time/test.csv"  # node 5: label nan
refused 1 "$work/ogb/split/time/test.csv:1: node 5 is in test but unlabelled" \
  --set input="$work/ogb"
printf '1,2\n3,-4\n' >"$work/ogb/raw/edge.csv"
refused 1 "$work/ogb/raw/edge.csv:2: destination id -4" --set input="$work/ogb"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "ondisk cli: OK"
