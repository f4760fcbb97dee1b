"""examples/graphsage.py on a small labelled graph: GraphSAGE over the store's sampled blocks
must learn what the features alone cannot tell (the MLP baseline on the same graph stays well
below).  Needs torch (the GPU machine has it); uses the GPU when there is one."""

import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "graphsage.py")
SMALL = ["--nodes", "20000", "--classes", "5", "--avg-degree", "10", "--homophily", "0.9",
         "--feature-dim", "16", "--snr", "0.5", "--train-fraction", "0.5", "--val-fraction",
         "0.1", "--epochs", "2", "--batch-size", "256", "--hidden", "64", "--fanouts", "10,5",
         "--graph-seed", "3"]


def run(*extra):
    env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, EXAMPLE, *SMALL, *extra], env=env, text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    assert p.returncode == 0, p.stdout
    summary = re.search(r"summary: (.*)", p.stdout)
    assert summary, p.stdout
    fields = dict(kv.split("=", 1) for kv in summary.group(1).split())
    assert len(re.findall(r"^epoch \d+: ", p.stdout, re.M)) == 2, p.stdout
    return fields, p.stdout


def test_graphsage_beats_features_alone():
    sage, out = run("--model", "sage")
    mlp, _ = run("--model", "mlp")
    # About 8,000 test nodes (40% of the graph), every one of them evaluated.
    tested = int(re.search(r"test accuracy [0-9.]+ on ([0-9,]+) test nodes", out).group(1)
                 .replace(",", ""))
    assert 7000 < tested < 9000, out
    assert float(sage["test_acc"]) >= 0.9, out
    assert float(mlp["test_acc"]) <= float(sage["test_acc"]) - 0.1, (sage, mlp)


def test_learnable_embeddings_train_through_the_store():
    fields, out = run("--model", "sage", "--embedding-dim", "8", "--max-batches", "20")
    assert float(fields["test_acc"]) >= 0.8, out
