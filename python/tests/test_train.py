"""wholestore.train against `wholestore train`: the same config gives the same embeddings bit for
bit (the CLI's --export), the same loss curve and scores (its printed lines and --report), for
the global and the blocks schedule and for every way of passing the graph (the gen.* graph, a
HostGraph, an EdgeSplit, an edge-list file); the keywords and defaults are the CLI's; bad
keywords and values are named; a diverging run raises TrainingDiverged; callbacks, Ctrl-C and
the released GIL; two ranks give one rank's embeddings."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import wholestore as ws
from conftest import has_gpu, run_ranks

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "..", "configs", "train.yaml")
# The program of the build the package was imported from (<build>/python/wholestore).
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ws.__file__))))
CLI = os.environ.get("WHOLESTORE_BIN", os.path.join(BUILD, "apps", "wholestore"))

SMALL = {"gen_num_nodes": 300, "gen_num_edges": 2000, "epochs": 2, "dim": 16}
SCHEDULES = {"global": {}, "blocks": {"schedule": "blocks", "partitions": 2}}


def cli_key(name):
    """The CLI's key of a keyword: the first underscore of gen_*, graph_* and table_* is a dot."""
    for prefix in ("gen_", "graph_", "table_"):
        if name.startswith(prefix):
            return prefix[:-1] + "." + name[len(prefix):]
    return name


def run_cli(tmp_path, name, settings):
    """`wholestore train configs/train.yaml --set ...` with --export and --report: (stdout,
    exported embeddings, report text)."""
    if not os.access(CLI, os.X_OK):
        pytest.skip(f"no wholestore program at {CLI} (set WHOLESTORE_BIN)")
    npy, report = tmp_path / f"{name}.npy", tmp_path / f"{name}.yaml"
    args = [CLI, "train", CONFIG]
    for key, value in settings.items():
        args += ["--set", f"{cli_key(key)}={value}"]
    args += ["--export", str(npy), "--report", str(report)]
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout
    return p.stdout, np.load(npy), report.read_text()


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    return {name: run_cli(tmp, name, {**SMALL, **extra}) for name, extra in SCHEDULES.items()}


@pytest.fixture(scope="module")
def small_graph():
    """The CLI's gen.* graph of SMALL, generated in Python."""
    return ws.generate_graph(300, 2000, seed=0, symmetrize=True, drop_self_loops=True)


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(
        a.view(np.uint32), b.view(np.uint32))


def report_curve(report):
    """The --report's curve: [(epoch, loss, pairs, roc_auc, hits_at_k)] as printed (10 digits)."""
    return re.findall(r"\{epoch: (\d+), loss: ([^,]+), pairs: (\d+), seconds: [^,]+, "
                      r"roc_auc: ([^,]+), hits_at_k: ([^}]+)\}", report)


def g10(x):
    """A double as the report prints it (C++ ostream, precision 10)."""
    return f"{x:.10g}"


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_same_embeddings_curve_and_scores_as_the_cli(comm, cli_runs, schedule):
    out, cli_embeddings, report = cli_runs[schedule]
    r = ws.train(comm=comm, **SMALL, **SCHEDULES[schedule])
    assert r.embeddings.shape == (300, 16) and r.embeddings.dtype == np.float32
    assert same_bits(r.embeddings, cli_embeddings)
    # The curve and the scores to the report's 10 digits, and as printed.
    curve = [(str(e.epoch), g10(e.loss), str(e.pairs), g10(e.auc), g10(e.hits)) for e in r.epochs]
    assert curve == report_curve(report) and len(curve) == 2
    for e in r.epochs:
        line = (f"  epoch {e.epoch}: loss {e.loss:.4f}, {e.pairs} pairs, {e.seconds:.2f} s, "
                f"ROC-AUC {e.auc:.4f}, Hits@50 {e.hits:.4f}")
        printed = re.search(rf"^  epoch {e.epoch}: .*$", out, re.M).group(0)
        assert re.sub(r"[0-9.]+ s,", "", printed) == re.sub(r"[0-9.]+ s,", "", line)
    for key, value in (("roc_auc", r.auc), ("hits_at_k", r.hits), ("pairs", r.pairs),
                       ("steps", r.steps), ("num_nodes", r.num_nodes),
                       ("train_edges", r.train_edges), ("held_out_edges", r.held_out_edges)):
        assert re.search(rf"^{key}: (.*)$", report, re.M).group(1) == (
            g10(value) if isinstance(value, float) else str(value)), key
    assert f"ROC-AUC {r.auc:.4f}, Hits@50 {r.hits:.4f}, loss {r.loss:.4f}," in out
    assert f'source: "{r.source}"' in report
    assert (r.first_epoch, r.last_epoch, r.device, r.ranks) == (0, 2, "cpu", 1)


@pytest.mark.skipif(not has_gpu(), reason="needs a GPU")
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_the_gpu_gives_the_clis_cpu_embeddings(comm, cli_runs, schedule):
    """The GPU path, tables and graph in device memory: the CPU's bits (trainer.hpp)."""
    _, want, _ = cli_runs[schedule]
    r = ws.train(comm=comm, **SMALL, **SCHEDULES[schedule], device="gpu",
                 table_location="device", graph_location="device")
    assert r.device == "gpu" and same_bits(r.embeddings, want)


def test_every_way_of_passing_the_graph(comm, cli_runs, small_graph, tmp_path):
    """A HostGraph (split here as the CLI splits), an EdgeSplit, an edge-list file and
    dataset=: the CLI's embeddings."""
    out, want, _ = cli_runs["global"]
    settings = {"epochs": 2, "dim": 16}
    r = ws.train(small_graph, comm=comm, **settings)
    assert same_bits(r.embeddings, want)
    assert (f"300 nodes, {r.train_edges} training edges (directed entries), "
            f"{r.held_out_edges} held out + {r.held_out_edges} non-edges") in out
    split = ws.split_edges(small_graph, 0.1, seed=0)
    assert split.num_nodes == 300 and split.train_graph.num_edges == r.train_edges
    assert split.test_edges.shape == split.test_non_edges.shape == (r.held_out_edges, 2)
    assert split.test_edges.dtype == np.int64
    assert same_bits(ws.train(split, comm=comm, **settings).embeddings, want)
    # An edge-list file of the graph's edges, one direction each (undirected adds the other).
    src = np.repeat(np.arange(300), np.diff(small_graph.row_offsets))
    dst = small_graph.col_indices
    edges = tmp_path / "edges.txt"
    edges.write_text("".join(f"{u} {v}\n" for u, v in zip(src, dst) if u < v))
    from_file = ws.train(edges, comm=comm, **settings)
    assert from_file.source == str(edges) and from_file.num_nodes <= 300
    out, cli_file, _ = run_cli(tmp_path, "file", {"dataset": edges, **settings})
    assert same_bits(from_file.embeddings, cli_file)
    assert same_bits(ws.train(dataset=str(edges), comm=comm, **settings).embeddings, cli_file)


def test_checkpoint_and_resume(comm, tmp_path):
    """--checkpoint and --resume as keywords: a run stopped after one epoch and resumed ends with
    the bits of one that never stopped, its curve including the first epoch."""
    whole = ws.train(comm=comm, **SMALL)
    first = ws.train(comm=comm, **SMALL, checkpoint=tmp_path / "ckpt", stop_after_epochs=1)
    assert first.last_epoch == 1 and (tmp_path / "ckpt" / "state.txt").is_file()
    rest = ws.train(comm=comm, **SMALL, resume=tmp_path / "ckpt")
    assert (rest.first_epoch, rest.last_epoch) == (1, 2)
    assert [(e.epoch, e.pairs, e.auc) for e in rest.epochs] == [
        (e.epoch, e.pairs, e.auc) for e in whole.epochs]
    assert same_bits(rest.embeddings, whole.embeddings)


def test_keywords_and_defaults_are_the_clis(cli_runs):
    """Every config key of the CLI (its --report lists them with their values) is a keyword
    with the value configs/train.yaml runs with; besides them only --checkpoint and --resume."""
    _, _, report = cli_runs["global"]
    config = report.split("\nconfig:\n")[1]
    values, section = {}, None
    for line in config.splitlines():
        m = re.match(r"^  (\s*)([a-z_]+):\s*(.*)$", line)
        if m.group(1):
            values[f"{section}_{m.group(2)}"] = m.group(3)
        elif m.group(3):
            values[m.group(2)] = m.group(3)
        else:
            section = m.group(2)
    assert set(ws.TRAIN_DEFAULTS) == set(values) | {"checkpoint", "resume"}
    for name, value in values.items():
        default = ws.TRAIN_DEFAULTS[name]
        if name in SMALL:
            assert value == str(SMALL[name])
        elif name == "timeout_s":
            assert default is None and value == "300"  # None: $WHOLESTORE_TIMEOUT or 300
        elif name == "dataset":
            assert default is None and value == '""'
        elif isinstance(default, bool):
            assert value == str(default).lower(), name
        elif isinstance(default, float):
            assert float(value) == default, name
        else:
            assert value == str(default), name


def test_unknown_keyword_is_named_with_the_valid_ones(comm):
    with pytest.raises(TypeError, match=r"unknown setting 'walk_lenght' \(did you mean "
                                        r"'walk_length'\?\).*: dataset, undirected, "
                                        r"gen_num_nodes, .*walk_length.*, resume$"):
        ws.train(comm=comm, walk_lenght=3)
    with pytest.raises(TypeError, match=r"unknown setting 'table\.type'"):
        ws.train(comm=comm, **{"table.type": "chunked"})


@pytest.mark.parametrize("settings, error, message", [
    ({"mode": "word2vec"}, ws.LogicError, r"^mode must be deepwalk, node2vec or line, got "
                                          r"'word2vec'$"),
    ({"schedule": "ring"}, ws.LogicError, r"^schedule must be global or blocks, got 'ring'$"),
    ({"negative_distribution": "zipf"}, ws.LogicError,
     r"^negative_distribution must be degree or uniform, got 'zipf'$"),
    ({"optimizer": "lion"}, ws.LogicError, r"^optimizer: unknown optimizer 'lion' \(sgd, adam"),
    ({"table_type": "paged"}, ws.LogicError, r"^table_type: unknown memory type 'paged'"),
    ({"device": "tpu"}, ws.LogicError, r"^device must be cpu, gpu or auto, got 'tpu'$"),
    ({"lr": 0}, ws.LogicError, r"^lr must be a positive number, got 0"),
    ({"p": -1}, ws.LogicError, r"^p must be a positive number, got -1"),
    ({"window": 5000}, ws.LogicError, r"^window must be at most 1024, got 5000"),
    ({"dim": 0}, ValueError, r"^dim must be at least 1, got 0$"),
    ({"partitions": -2}, ValueError, r"^partitions must be at least 0, got -2$"),
    ({"negatives": 2**32 + 1}, ValueError,
     r"^negatives must be at most 2147483647, got 4294967297$"),  # would wrap to 1 in C++
    ({"holdout": 1.0}, ValueError, r"^holdout must be in \(0, 1\), got 1\.0$"),
    ({"schedule": "blocks", "partitions": 301}, ws.LogicError,
     r"^schedule blocks: 301 partitions of a graph of 300 nodes"),
    ({"walk_length": "20"}, TypeError, r"^walk_length must be an integer, not str '20'$"),
    ({"epochs": 1.5}, TypeError, r"^epochs must be an integer, not float 1\.5$"),
    ({"undirected": 1}, TypeError, r"^undirected must be True or False, not int 1$"),
    ({"mode": 2}, TypeError, r"^mode must be a str, not int$"),
])
def test_bad_values_are_named(comm, settings, error, message):
    with pytest.raises(error, match=message) as caught:
        ws.train(comm=comm, **{**SMALL, **settings})
    assert isinstance(caught.value, ValueError) == (error is not TypeError)


def test_settings_that_do_not_fit_the_graph_given(comm, small_graph):
    with pytest.raises(ValueError, match="^gen_num_nodes describes the generated graph"):
        ws.train(small_graph, comm=comm, gen_num_nodes=10)
    with pytest.raises(ValueError, match="^holdout: the EdgeSplit given has held out"):
        ws.train(ws.split_edges(small_graph), comm=comm, holdout=0.2)
    with pytest.raises(ValueError, match="^pass the graph or dataset=, not both"):
        ws.train(small_graph, comm=comm, dataset="x")
    with pytest.raises(TypeError, match="^graph must be a HostGraph, an EdgeSplit"):
        ws.train(np.zeros(3), comm=comm)
    with pytest.raises(ValueError, match="^timeout_s applies to the job train joins"):
        ws.train(small_graph, comm=comm, timeout_s=10)
    with pytest.raises(ws.LogicError, match="^HostGraph \\(3 nodes, 0 edges\\) has no edges"):
        ws.train(ws.HostGraph(np.zeros(4, np.int64), np.zeros(0, np.int64)), comm=comm)


def test_a_diverging_run_raises_training_diverged(comm):
    assert issubclass(ws.TrainingDiverged, RuntimeError)
    with pytest.raises(ws.TrainingDiverged, match=r"^training diverged at epoch 1, step \d+ of "
                                                  r"17 \(lr [0-9.]+\): .*use the adam or "
                                                  r"adagrad optimizer"):
        ws.train(comm=comm, **SMALL, optimizer="sgd", lr=1000)


def test_callbacks_see_every_step_and_epoch(comm):
    steps, records = [], []
    r = ws.train(comm=comm, **SMALL, eval_every=0,
                 progress=lambda *a: steps.append(a), on_epoch=records.append)
    assert [s[:3] for s in steps] == [(e, s, 17) for e in (1, 2) for s in range(1, 18)]
    # After an epoch's last step the running loss is the epoch's (one rank).
    assert [steps[16][3], steps[33][3]] == [e.loss for e in r.epochs]
    assert records == r.epochs
    assert [e.evaluated for e in r.epochs] == [False, True] and r.epochs[0].auc is None
    with pytest.raises(ZeroDivisionError):
        ws.train(comm=comm, **SMALL, progress=lambda *a: 1 / 0)
    with pytest.raises(TypeError, match="^progress must be callable or None, not int$"):
        ws.train(comm=comm, **SMALL, progress=3)


def test_training_releases_the_gil(comm):
    """Another Python thread runs while train works: its counter moves between epochs.  The
    thread sleeps between counts (giving the GIL back) and the switch interval is long, so it
    could only count while train holds the GIL if train released it."""
    seen, done, counter = [], threading.Event(), [0]

    def count():
        while not done.is_set():
            counter[0] += 1
            time.sleep(0.001)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    t = threading.Thread(target=count)
    t.start()
    try:
        ws.train(comm=comm, **{**SMALL, "epochs": 4}, on_epoch=lambda e: seen.append(counter[0]))
    finally:
        done.set()
        t.join()
        sys.setswitchinterval(interval)
    assert len(seen) == 4 and any(b > a for a, b in zip(seen, seen[1:])), seen


def test_ctrl_c_ends_the_run(comm):
    """SIGINT during a long one-rank run (no waits to end, no callback): KeyboardInterrupt at the
    next step, not after the 100 epochs (16 s on the 2-core VM)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGINT))
    start = time.monotonic()
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            ws.train(comm=comm, gen_num_nodes=2000, gen_num_edges=20000, dim=16, epochs=100,
                     eval_every=0)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 3


def test_two_ranks_give_one_ranks_embeddings(comm, tmp_path):
    """Two processes (the multirank_worker's `train`): global on any rank count, and blocks on
    any rank count dividing the partitions, give one rank's bits; settings that differ between
    the ranks raise MismatchError on both."""
    outputs = run_ranks(2, "train", tmp_path)
    assert all("MismatchError: wholestore.train: the settings of every rank must match: the "
               "ranks disagree on dim" in out for out in outputs), outputs
    for name, extra in SCHEDULES.items():
        one = ws.train(comm=comm, **SMALL, **extra)
        assert same_bits(np.load(tmp_path / f"{name}.npy"), one.embeddings), name
