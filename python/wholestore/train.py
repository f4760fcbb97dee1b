"""Node embeddings by skip-gram with negative sampling (DeepWalk, node2vec, LINE), scored by
link prediction on held-out edges: ``wholestore train`` as a function.

``train`` calls the library function the CLI calls (train/trainer.hpp, ``train_embeddings``),
takes the CLI's config keys as keywords with the values ``wholestore train configs/train.yaml``
runs with (docs/config.md describes each; a dot becomes an underscore: ``table.type`` is
``table_type``, ``gen.num_nodes`` is ``gen_num_nodes``), builds and splits the graph as the CLI
does, and so gives the embeddings the CLI exports with ``--export``, bit for bit, and the same
loss curve and scores::

    import wholestore as ws
    r = ws.train(gen_num_nodes=300, gen_num_edges=2000, dim=16)   # the CLI's gen.* graph
    r.embeddings                       # [nodes, dim] float32 numpy array (None off rank 0)
    r.auc, r.hits, [e.loss for e in r.epochs]
    ws.train("../shared/data/facebook_combined.txt", mode="node2vec", p=0.5, q=2,
             progress=lambda epoch, step, steps, loss: print(epoch, step, steps, loss))

Collective: every rank of ``comm`` calls it with the same settings and graph (checked: a
difference raises MismatchError on every rank, naming the setting).  Errors: an unknown
keyword or a value of the wrong kind raises TypeError naming it; a bad value raises the
library's LogicError (a ValueError) with its message; a run that diverges raises
TrainingDiverged (a RuntimeError) on every rank at the same step.  The GIL is released while
the graph is read and while training; Ctrl-C ends the run at the next step
(KeyboardInterrupt).
"""

import difflib
import numbers
import os
from dataclasses import dataclass, field
from typing import List, Optional

from . import _checks, _core
from .graph import EdgeSplit, HostGraph

TrainingDiverged = _core.TrainingDiverged

_INT_MAX = 2**31 - 1  # the trainer's int settings
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1


@dataclass(frozen=True)
class _Setting:
    default: object
    kind: str  # "int", "number", "str", "bool", "path" (None or a path)
    low: Optional[int] = None
    high: Optional[int] = None


# The CLI's keys in its order (apps/train.cpp's schema), with configs/train.yaml's values and, for
# integers, the range the CLI accepts (the trainer checks each value's own bounds after).
# "checkpoint" and "resume" are the CLI's --checkpoint and --resume.
_SETTINGS = {
    "dataset": _Setting(None, "path"),
    "undirected": _Setting(True, "bool"),
    "gen_num_nodes": _Setting(10000, "int", 1, _U64_MAX),
    "gen_num_edges": _Setting(100000, "int", 0, _U64_MAX),
    "gen_seed": _Setting(0, "int", 0, _U64_MAX),
    "graph_type": _Setting("continuous", "str"),
    "graph_location": _Setting("host", "str"),
    "graph_replicate": _Setting(False, "bool"),
    "mode": _Setting("deepwalk", "str"),
    "walk_length": _Setting(20, "int", 1, _INT_MAX),
    "window": _Setting(3, "int", 1, _INT_MAX),
    "walks_per_node": _Setting(2, "int", 1, _INT_MAX),
    "p": _Setting(1.0, "number"),
    "q": _Setting(1.0, "number"),
    "negatives": _Setting(5, "int", 1, _INT_MAX),
    "negative_distribution": _Setting("degree", "str"),
    "dim": _Setting(128, "int", 1, _U64_MAX),
    "batch_size": _Setting(4096, "int", 1, _U64_MAX),
    "epochs": _Setting(2, "int", 1, _INT_MAX),
    "lr": _Setting(0.1, "number"),
    "min_lr_fraction": _Setting(0.0001, "number"),
    "optimizer": _Setting("adagrad", "str"),
    "schedule": _Setting("global", "str"),
    "partitions": _Setting(0, "int", 0, _INT_MAX),
    "block_steps": _Setting(0, "int", 0, _INT_MAX),
    "block_batch": _Setting(0, "int", 0, _U64_MAX),
    "table_type": _Setting("continuous", "str"),
    "table_location": _Setting("host", "str"),
    "device": _Setting("cpu", "str"),
    "seed": _Setting(0, "int", 0, _U64_MAX),
    "holdout": _Setting(0.1, "number"),
    "eval_every": _Setting(1, "int", 0, _INT_MAX),
    "hits_k": _Setting(50, "int", 1, _INT_MAX),
    "threads": _Setting(0, "int", 0, _U32_MAX),
    "checkpoint_every": _Setting(1, "int", 1, _INT_MAX),
    "stop_after_epochs": _Setting(0, "int", 0, _INT_MAX),
    "timeout_s": _Setting(None, "number"),
    "checkpoint": _Setting(None, "path"),
    "resume": _Setting(None, "path"),
}

#: Every keyword setting of ``train`` and its default (``timeout_s`` None: $WHOLESTORE_TIMEOUT or
#: 300 s, as the CLI; ``dataset``, ``checkpoint``, ``resume`` None: none).
DEFAULTS = {name: s.default for name, s in _SETTINGS.items()}

# Settings of the graph train builds itself: refused with a graph that is passed in.
_GENERATED = ("gen_num_nodes", "gen_num_edges", "gen_seed")


@dataclass(frozen=True)
class EpochRecord:
    """One epoch of a run: the mean loss per positive pair, the positive pairs trained on, the
    training time (the slowest rank's, without evaluation), and the link-prediction scores when
    the epoch was evaluated (``eval_every``; the last one always is), else None."""

    epoch: int  # 1-based
    loss: float
    pairs: int
    seconds: float
    auc: Optional[float] = None
    hits: Optional[float] = None

    @property
    def evaluated(self):
        return self.auc is not None


@dataclass
class TrainResult:
    """What ``wholestore train`` prints and reports (``--report``) and exports (``--export``).

    ``embeddings``: the input vectors, [num_nodes, dim] float32 (rank 0; None on the other
    ranks).  ``epochs``: every epoch of the run (those of a resumed checkpoint included).
    ``auc``, ``hits``: ROC-AUC and Hits@``hits_k`` after the last epoch.  ``pairs``, ``steps``,
    ``train_s``: positive pairs, steps and training time (slowest rank) of this call.
    ``walk_s``, ``step_s`` and ``gpu_*_s``: rank 0's time split (trainer.hpp, train_result).
    ``settings``: every setting the run used."""

    embeddings: object
    epochs: List[EpochRecord]
    auc: float
    hits: float
    hits_k: int
    pairs: int
    steps: int
    train_s: float
    first_epoch: int
    last_epoch: int
    num_nodes: int
    train_edges: int
    held_out_edges: int
    source: str
    device: str
    ranks: int
    walk_s: float = 0.0
    step_s: float = 0.0
    gpu_lookup_s: float = 0.0
    gpu_sgns_s: float = 0.0
    gpu_input_update_s: float = 0.0
    gpu_output_update_s: float = 0.0
    settings: dict = field(default_factory=dict)

    @property
    def loss(self):
        """The last epoch's mean loss (the CLI's summary line)."""
        return self.epochs[-1].loss if self.epochs else 0.0

    @property
    def pairs_per_s(self):
        """All ranks' positive pairs over the slowest rank's training time (the summary's)."""
        return self.pairs / self.train_s if self.train_s > 0 else 0.0

    def __repr__(self):
        return (f"TrainResult({self.source}: {self.num_nodes} nodes, {self.last_epoch} "
                f"epoch(s), ROC-AUC {self.auc:.4f}, Hits@{self.hits_k} {self.hits:.4f}, "
                f"loss {self.loss:.4f}, {self.train_s:.2f} s)")


def _unknown(name):
    valid = ", ".join(_SETTINGS)
    close = difflib.get_close_matches(name, _SETTINGS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(f"train() got an unknown setting {name!r}{hint}; the settings are the "
                     f"CLI's config keys (a dot as an underscore): {valid}")


def _value(name, value):
    """``value`` of setting ``name`` in the kind the library takes; TypeError for another kind,
    ValueError for an integer outside the range the CLI accepts."""
    s = _SETTINGS[name]
    if s.kind == "path":
        return None if value is None else _checks.path(value, name)
    if s.kind == "str":
        return _checks.text(value, name)
    if s.kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, not {type(value).__name__} {value!r}")
        return value
    if s.kind == "number":
        if name == "timeout_s" and value is None:
            return None
        return _checks.number(value, name)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} {value!r}")
    value = _checks.integer(value, name)
    if value < s.low:
        raise ValueError(f"{name} must be at least {s.low}, got {value}")
    if value > s.high:
        raise ValueError(f"{name} must be at most {s.high}, got {value}")
    return value


def _source(graph, values, given):
    """What the C++ side builds the split from: an EdgeSplit, a HostGraph, a path (dataset
    directory or edge-list file) or None (the gen_* graph)."""
    dataset = values["dataset"]
    if graph is not None and dataset:
        raise ValueError("pass the graph or dataset=, not both")
    source = graph if graph is not None else (dataset or None)
    if isinstance(source, (str, bytes, os.PathLike)):
        source = _checks.path(source, "graph")
        if isinstance(source, bytes):
            source = os.fsdecode(source)
    elif source is not None and not isinstance(source, (HostGraph, EdgeSplit)):
        raise TypeError(f"graph must be a HostGraph, an EdgeSplit (split_edges), a dataset "
                        f"directory or edge-list file, or None (the gen_* graph), not "
                        f"{type(source).__name__}")
    if source is not None:
        for name in _GENERATED:
            if name in given:
                raise ValueError(f"{name} describes the generated graph, and a graph was given")
    if "undirected" in given and isinstance(source, (HostGraph, EdgeSplit)):
        raise ValueError("undirected applies to an edge-list file; a HostGraph keeps its edges "
                         "as they are")
    if "holdout" in given and isinstance(source, EdgeSplit):
        raise ValueError("holdout: the EdgeSplit given has held out its edges already")
    return source


def train(graph=None, *, comm=None, progress=None, on_epoch=None, **settings):
    """Trains node embeddings as ``wholestore train`` does and returns a TrainResult.

    ``graph``: a HostGraph (split here with ``holdout`` and ``seed``, as the CLI splits), an
    EdgeSplit (``split_edges``; trained as it is), a dataset directory or edge-list file (the
    CLI's ``dataset``; ``undirected`` for an edge list), or None: ``dataset=`` if given, else
    the R-MAT graph of ``gen_num_nodes``, ``gen_num_edges`` and ``gen_seed`` (symmetrized, no
    self loops), the CLI's default.

    ``settings``: the CLI's config keys (``wholestore.TRAIN_DEFAULTS`` lists them with their
    defaults), plus ``checkpoint`` and ``resume`` (directories, the CLI's --checkpoint and
    --resume: a run stopped by ``stop_after_epochs`` and resumed ends with the embeddings of
    one that never stopped).

    ``comm``: the job's Communicator (every rank calls, each with the same settings and
    graph); None makes one with ``wholestore.init(timeout=timeout_s)``, a job of one process
    unless the launch environment says otherwise (pass ``comm`` when the program already
    joined its job).

    ``progress(epoch, step, steps, loss)``: after each step (epoch and step 1-based, ``loss``
    the mean loss of this rank's pairs so far in the epoch); ``on_epoch(record)``: after each
    epoch with its EpochRecord.  Both run on every rank; an exception in either ends the run
    with it (on this rank: in a job of several ranks the others then fail at their timeout).
    """
    given = set(settings)
    for name in settings:
        if name not in _SETTINGS:
            raise _unknown(name)
    for name, fn in (("progress", progress), ("on_epoch", on_epoch)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be callable or None, not {type(fn).__name__}")
    values = {name: _value(name, settings.get(name, s.default)) for name, s in _SETTINGS.items()}
    source = _source(graph, values, given)
    holdout = values["holdout"]
    if not 0 < holdout < 1:
        raise ValueError(f"holdout must be in (0, 1), got {holdout}")
    if comm is None:
        from .memory import init
        comm = init(timeout=values["timeout_s"], device=None)
    else:
        _checks.communicator(comm)
        if "timeout_s" in given:
            raise ValueError("timeout_s applies to the job train joins when comm is None; give it "
                             "to wholestore.init(timeout=...) for this Communicator")

    core_settings = {name: value for name, value in values.items()
                     if name not in ("dataset", "timeout_s")}
    core_settings["checkpoint"] = values["checkpoint"] or ""
    core_settings["resume"] = values["resume"] or ""
    epoch_callback = None
    if on_epoch is not None:
        def epoch_callback(record):
            on_epoch(EpochRecord(**record))

    r = _core.train_embeddings(comm, source, core_settings, progress, epoch_callback)
    r["epochs"] = [EpochRecord(**e) for e in r["epochs"]]
    return TrainResult(hits_k=values["hits_k"], settings=values, **r)
