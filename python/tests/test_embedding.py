"""Embedding tables from Python: lookups, every optimizer against a float64 reference written
here from the update rules in embedding/include/embedding/table.hpp, raw row writes, state,
checkpoints and the error paths."""

import numpy as np
import pytest

import wholestore as ws

HYPER = dict(beta1=0.9, beta2=0.999, eps=1e-8, alpha=0.99)


class ReferenceOptimizer:
    """The sparse optimizers in float64: duplicate gradients summed, weight decay, one update
    per touched row (lazy: untouched rows keep weights and state)."""

    def __init__(self, kind, weights, weight_decay=0.0, initial_accumulator=0.0):
        self.kind = kind
        self.w = weights.astype(np.float64)
        self.wd = weight_decay
        rows, dim = self.w.shape
        self.m = np.zeros((rows, dim))
        self.v = np.zeros((rows, dim))
        self.s = np.full((rows, 1 if kind == "rowwise_adagrad" else dim), initial_accumulator,
                         dtype=np.float64)
        self.t = 0

    def step(self, indices, grads, lr):
        self.t += 1
        summed = {}
        for i, g in zip(indices.tolist(), grads.astype(np.float64)):
            summed[i] = summed.get(i, 0.0) + g
        b1, b2, eps, alpha = HYPER["beta1"], HYPER["beta2"], HYPER["eps"], HYPER["alpha"]
        for r, g in summed.items():
            w = self.w[r]
            if self.wd:
                g = g + self.wd * w
            if self.kind == "sgd":
                w -= lr * g
            elif self.kind == "adam":
                self.m[r] = b1 * self.m[r] + (1 - b1) * g
                self.v[r] = b2 * self.v[r] + (1 - b2) * g * g
                step = lr / (1 - b1 ** self.t)
                w -= step * self.m[r] / (np.sqrt(self.v[r]) / np.sqrt(1 - b2 ** self.t) + eps)
            elif self.kind == "adagrad":
                self.s[r] += g * g
                w -= lr * g / (np.sqrt(self.s[r]) + eps)
            elif self.kind == "rowwise_adagrad":
                self.s[r] += np.mean(g * g)
                w -= lr * g / (np.sqrt(self.s[r]) + eps)
            elif self.kind == "rmsprop":
                self.s[r] = alpha * self.s[r] + (1 - alpha) * g * g
                w -= lr * g / (np.sqrt(self.s[r]) + eps)

    def state(self, name):
        return {"m": self.m, "v": self.v, "sum": self.s, "square_avg": self.s}[name]


def make_table(comm, optimizer, rows=50, dim=7, **kwargs):
    return ws.EmbeddingTable(comm, rows, dim, "float32", kwargs.pop("type", "continuous"),
                             "host", optimizer=optimizer, init_range=(-1.0, 1.0), seed=3,
                             **HYPER, **kwargs)


def test_optimizer_names():
    assert ws.OPTIMIZERS == ("sgd", "adam", "adagrad", "rowwise_adagrad", "rmsprop")


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adagrad", "rowwise_adagrad", "rmsprop"])
@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
@pytest.mark.parametrize("type", ["continuous", "chunked", "distributed"])
def test_optimizer_steps_match_float64_reference(comm, optimizer, weight_decay, type):
    rng = np.random.default_rng(11)
    accumulator = 0.1 if optimizer in ("adagrad", "rowwise_adagrad", "rmsprop") else 0.0
    t = make_table(comm, optimizer, weight_decay=weight_decay, type=type,
                   initial_accumulator=accumulator)
    all_rows = np.arange(t.rows)
    ref = ReferenceOptimizer(optimizer, t.lookup(all_rows), weight_decay, accumulator)
    assert t.state_names == {"sgd": [], "adam": ["m", "v"], "adagrad": ["sum"],
                             "rowwise_adagrad": ["sum"], "rmsprop": ["square_avg"]}[optimizer]
    for step in range(4):
        indices = rng.integers(0, t.rows, size=40)
        indices[:3] = [0, t.rows - 1, indices[3]]  # the ends and a duplicate
        grads = rng.standard_normal((40, t.dim)).astype(np.float32)
        lr = 0.05 * (step + 1)
        t.apply_gradients(indices, grads, lr)
        ref.step(indices, grads, lr)
        got = t.lookup(all_rows).astype(np.float64)
        np.testing.assert_allclose(got, ref.w, rtol=0, atol=2e-5 * (np.abs(ref.w).max() + lr))
    assert t.step == 4
    for name in t.state_names:
        np.testing.assert_allclose(t.read_state(name, all_rows), ref.state(name), rtol=1e-5,
                                   atol=1e-6)


def test_lookup_dtypes_and_init(comm):
    # The initial values depend only on (seed, row, column): any type gives the same table.
    a = ws.EmbeddingTable(comm, 30, 5, type="continuous", init="normal", init_std=0.5, seed=9)
    b = ws.EmbeddingTable(comm, 30, 5, type="distributed", init="normal", init_std=0.5, seed=9)
    idx = np.array([29, 0, 3, 3], np.int32)
    np.testing.assert_array_equal(a.lookup(idx), b.lookup(idx))
    assert a.lookup(idx).std() > 0.1
    np.testing.assert_array_equal(a.lookup(idx, dtype="float64"),
                                  a.lookup(idx).astype(np.float64))
    half = ws.EmbeddingTable(comm, 30, 5, dtype="float16", init="normal", init_std=0.5, seed=9)
    np.testing.assert_array_equal(half.lookup(idx, dtype="float32"),
                                  a.lookup(idx).astype(np.float16).astype(np.float32))
    zeros = ws.EmbeddingTable(comm, 4, 3, init="zeros")
    np.testing.assert_array_equal(zeros.lookup([0, 3]), 0)


def test_write_rows_and_local_weights(comm):
    t = make_table(comm, "adam")
    first, local = t.local_weights()
    assert first == 0 and local.shape == (t.rows, t.dim) and t.own_rows == (0, t.rows)
    rows = np.arange(14, dtype=np.float32).reshape(2, 7)
    t.write_rows([5, 49], rows)
    np.testing.assert_array_equal(t.lookup([5, 49]), rows)
    np.testing.assert_array_equal(local[[5, 49]], rows)  # the view is the table's memory
    assert t.step == 0  # raw writes are not optimizer steps
    np.testing.assert_array_equal(t.read_state("m", [5]), 0)


def test_checkpoint_round_trip(comm, tmp_path):
    rng = np.random.default_rng(12)
    t = make_table(comm, "adam", type="chunked")
    for _ in range(2):
        t.apply_gradients(rng.integers(0, 50, 20), rng.standard_normal((20, 7)).astype(np.float32), 0.1)
    t.store_checkpoint(tmp_path / "ckpt")
    saved = t.lookup(np.arange(50))
    saved_m = t.read_state("m", np.arange(50))
    t.apply_gradients([1, 2], np.ones((2, 7), np.float32), 0.1)
    assert not np.array_equal(t.lookup(np.arange(50)), saved)
    # Into another memory type: weights, state and step come back.
    u = make_table(comm, "adam", type="distributed")
    u.load_checkpoint(tmp_path / "ckpt")
    np.testing.assert_array_equal(u.lookup(np.arange(50)), saved)
    np.testing.assert_array_equal(u.read_state("m", np.arange(50)), saved_m)
    assert u.step == 2
    # A table of another optimizer is refused, unchanged.
    s = make_table(comm, "sgd")
    before = s.lookup(np.arange(50))
    with pytest.raises(ws.LogicError, match="optimizer"):
        s.load_checkpoint(tmp_path / "ckpt")
    np.testing.assert_array_equal(s.lookup(np.arange(50)), before)


def test_errors(comm):
    with pytest.raises(ws.LogicError, match="momentum"):
        make_table(comm, "momentum")
    with pytest.raises(ws.LogicError, match="dim"):
        ws.EmbeddingTable(comm, 10, 0)
    t = make_table(comm, "adagrad")
    before = t.lookup(np.arange(50))
    with pytest.raises(ws.LogicError, match="index 50 at position 2"):
        t.apply_gradients([1, 2, 50], np.ones((3, 7), np.float32), 0.1)
    np.testing.assert_array_equal(t.lookup(np.arange(50)), before)
    assert t.step == 0
    with pytest.raises(ValueError, match="grads has 2 rows, expected 3"):
        t.apply_gradients([1, 2, 3], np.ones((2, 7), np.float32), 0.1)
    with pytest.raises(ValueError, match="out has shape"):
        t.lookup([1], out=np.zeros((1, 6), np.float32))
    with pytest.raises(ValueError, match="no state 'm'"):
        t.read_state("m", [0])
    with pytest.raises(ws.LogicError, match="index -3 at position 0"):
        t.lookup([-3])
    t.free()
    with pytest.raises(ValueError, match="freed"):
        t.lookup([0])


@pytest.mark.parametrize("lr", [-1, 0, -0.0, float("nan"), float("inf"), -float("inf"), 1e39])
def test_learning_rate_must_be_positive_and_finite(comm, lr):
    """As the CLI's train refuses it: a negative rate would climb the loss, NaN or infinity
    would poison every touched row.  Nothing changes."""
    t = make_table(comm, "adam")
    before = t.lookup(np.arange(50))
    with pytest.raises(ValueError, match=r"lr must be a positive finite number "
                                         r"\(0 < lr <= 3.40282e\+38\), got "):
        t.apply_gradients([1, 2], np.ones((2, 7), np.float32), lr)
    np.testing.assert_array_equal(t.lookup(np.arange(50)), before)
    np.testing.assert_array_equal(t.read_state("m", np.arange(50)), 0)
    assert t.step == 0
    t.apply_gradients([1, 2], np.ones((2, 7), np.float32), 1e-9)  # small is fine
    assert t.step == 1


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("bad, name", [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")])
def test_non_finite_gradients_are_refused(comm, dtype, bad, name):
    """A NaN or infinite gradient (the CPU path) raises naming where it is, before anything
    changes: weights, optimizer state and step stay as they were."""
    t = make_table(comm, "adagrad", initial_accumulator=0.1)
    before, state = t.lookup(np.arange(50)), t.read_state("sum", np.arange(50))
    grads = np.ones((4, 7), dtype)
    grads[3, 5] = bad
    with pytest.raises(ValueError, match=f"grads holds {name} at row 3, column 5; gradients "
                                         "must be finite"):
        t.apply_gradients([0, 1, 2, 49], grads, 0.1)
    np.testing.assert_array_equal(t.lookup(np.arange(50)), before)
    np.testing.assert_array_equal(t.read_state("sum", np.arange(50)), state)
    assert t.step == 0
    # Only the matrix is read: NaN in the padding of rows with a longer stride is no gradient.
    padded = np.full((4, 9), bad, dtype)
    padded[:, :7] = 1
    t.apply_gradients([0, 1, 2, 49], padded[:, :7], 0.1)
    assert t.step == 1 and np.isfinite(t.lookup(np.arange(50))).all()


def test_wrong_argument_types_name_the_argument(comm):
    """A wrong type raises TypeError naming the argument and what it must be, not nanobind's
    list of C++ signatures, and int()/float() no longer take strings or truncate fractions."""
    t = make_table(comm, "sgd")
    grads = np.ones((1, 7), np.float32)
    cases = [
        (lambda: ws.EmbeddingTable("comm", 10, 4), "comm must be a wholestore Communicator"),
        (lambda: ws.EmbeddingTable(comm, "10", 4), "rows must be an integer, not str"),
        (lambda: ws.EmbeddingTable(comm, 10, 4.5), "dim must be an integer, not float"),
        (lambda: ws.EmbeddingTable(comm, 10, 4, type=3), "type must be a str, not int"),
        (lambda: ws.EmbeddingTable(comm, 10, 4, optimizer=None), "optimizer must be a str"),
        (lambda: ws.EmbeddingTable(comm, 10, 4, init_range=0.1), "init_range must be a pair"),
        (lambda: ws.EmbeddingTable(comm, 10, 4, beta1="0.9"), "beta1 must be a number"),
        (lambda: t.lookup(None), "indices must be an array"),
        (lambda: t.lookup([1.5]), "indices must be integers, not float64"),
        (lambda: t.lookup("3"), "indices must be integers"),
        (lambda: t.lookup([1], out="x"), "out must be an array"),
        (lambda: t.apply_gradients([1], None, 0.1), "grads must be an array"),
        (lambda: t.apply_gradients([1], grads, "0.1"), "lr must be a number"),
        (lambda: t.apply_gradients([1], grads, None), "lr must be a number"),
        (lambda: t.write_rows([1], {"a": 1}), "rows must be an array"),
        (lambda: t.read_state(0, [1]), "name must be a str"),
        (lambda: t.store_checkpoint(5), "dir must be a path"),
        (lambda: setattr(t, "step", "2"), "step must be an integer"),
        (lambda: ws.DeviceCache("table", [1]), "table must be an EmbeddingTable"),
        (lambda: ws.hottest_rows([1, 2], "10", 1), "rows must be an integer"),
    ]
    for call, message in cases:
        with pytest.raises(TypeError, match=message) as info:
            call()
        assert "incompatible function arguments" not in str(info.value)
    # What was accepted still is: numpy integers, whole floats, numpy floats as rates.
    u = ws.EmbeddingTable(comm, np.int64(10), 4.0, init_range=[np.float32(-1), 1])
    u.apply_gradients(np.array([1], np.int32), np.ones((1, 4), np.float32), np.float32(0.5))
    assert u.shape == (10, 4) and u.step == 1


def global_batches(ranks):
    """Three steps of a global batch (with duplicates across ranks) split into `ranks` lists:
    the ranks' lists concatenated in rank order are the same global batch for any split."""
    rng = np.random.default_rng(21)
    batches = []
    for step in range(3):
        indices = rng.integers(0, 40, size=30)
        indices[:4] = [0, 39, 5, 5]
        grads = rng.standard_normal((30, 6)).astype(np.float32)
        cuts = np.linspace(0, 30, ranks + 1).astype(int)
        batches.append(([indices[cuts[r]:cuts[r + 1]] for r in range(ranks)],
                        [grads[cuts[r]:cuts[r + 1]] for r in range(ranks)], 0.1 * (step + 1)))
    return batches
