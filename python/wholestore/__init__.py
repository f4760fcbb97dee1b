"""wholestore: graph datasets and embedding tables in memory that every process (and GPU) of a
job addresses as if it were local.

    import numpy as np, wholestore as ws
    comm = ws.init()                                  # one process, or launch/torchrun/mpirun env
    table = ws.EmbeddingTable(comm, 1000, 16, optimizer="adam")
    rows = table.lookup(np.array([3, 1, 3]))          # [3, 16] float32
    table.apply_gradients(np.array([3, 1]), np.ones((2, 16), np.float32), lr=0.1)
    result = ws.train(comm=comm, dim=16)              # `wholestore train`, its config keys
    loader = ws.NeighborLoader(graph, seeds, [15, 10], 1024, comm=comm)   # wholestore.loader

Arrays cross by DLPack (numpy, torch, CuPy, JAX, ...).  Errors of the C++ library are
subclasses of WholestoreError and of the builtin that says what went wrong: LogicError (a
ValueError: a bad argument), IndexOutOfRangeError (a LogicError and an IndexError: an index,
seed or start node outside its table or graph), NotFoundError (a FileNotFoundError: a missing
file or directory), MismatchError (a LogicError: ranks disagree), PeerTimeoutError (a
TimeoutError and a RuntimeError), OutOfMemoryError (a MemoryError), CudaError, NcclError and
SystemCallError (RuntimeErrors); the trainer's TrainingDiverged is a RuntimeError.  Messages are
the library's without its source locations ("(dataset.cpp:336, failed: ...)"), which
WHOLESTORE_DEBUG=1 keeps.  Ctrl-C during a call that waits for other ranks ends the wait within
about 100 ms and raises KeyboardInterrupt (Interrupted, a PeerTimeoutError, if Python's SIGINT
handler was replaced by one that does not raise); the job's communicators are unusable
afterwards, as after a timeout.
"""

from ._core import (  # noqa: F401
    Communicator,
    CudaError,
    HostGraph,
    IndexOutOfRangeError,
    Interrupted,
    LogicError,
    MismatchError,
    NcclError,
    NotFoundError,
    OutOfMemoryError,
    PeerTimeoutError,
    SystemCallError,
    WholestoreError,
    cuda_built,
    current_device,
    device_count,
    read_launch_env,
    set_device,
)
from ._core import __version__  # noqa: F401
from .embedding import OPTIMIZERS, DeviceCache, EmbeddingTable, hottest_rows  # noqa: F401
from .graph import (  # noqa: F401
    SAMPLE_METHODS,
    Block,
    EdgeSplit,
    GpuSampler,
    Graph,
    NegativeSampler,
    convert_edge_list,
    generate_graph,
    generate_sbm,
    load_graph,
    make_graph,
    read_dataset,
    read_manifest,
    split_edges,
    to_dgl_blocks_args,
    to_pyg,
    write_dataset,
)
from .loader import Batch, NeighborLoader, NodeLoader  # noqa: F401
from .memory import LOCATIONS, TYPES, WholeMemory, init  # noqa: F401
# wholestore.train is the function (the module's other names are here too).
from .train import DEFAULTS as TRAIN_DEFAULTS  # noqa: F401
from .train import EpochRecord, TrainingDiverged, TrainResult, train  # noqa: F401
from . import distributed, loader, nn  # noqa: F401,E402  (torch: on first use of nn.Embedding only)
