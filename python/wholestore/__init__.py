"""wholestore: graph datasets and embedding tables in memory that every process (and GPU) of a
job addresses as if it were local.

    import numpy as np, wholestore as ws
    comm = ws.init()                                  # one process, or launch/torchrun/mpirun env
    table = ws.EmbeddingTable(comm, 1000, 16, optimizer="adam")
    rows = table.lookup(np.array([3, 1, 3]))          # [3, 16] float32
    table.apply_gradients(np.array([3, 1]), np.ones((2, 16), np.float32), lr=0.1)
    result = ws.train(comm=comm, dim=16)              # `wholestore train`, its config keys

Arrays cross by DLPack (numpy, torch, CuPy, JAX, ...).  Errors of the C++ library arrive as
LogicError (a ValueError: a bad argument), MismatchError (ranks disagree), and RuntimeError
subclasses (CudaError, NcclError, SystemCallError, PeerTimeoutError, the trainer's
TrainingDiverged), with the library's message.  Ctrl-C during a call that waits for other
ranks ends the wait within about 100 ms and raises KeyboardInterrupt (Interrupted, a
PeerTimeoutError, if Python's SIGINT handler was replaced by one that does not raise); the
job's communicators are unusable afterwards, as after a timeout.
"""

from ._core import (  # noqa: F401
    Communicator,
    CudaError,
    HostGraph,
    Interrupted,
    LogicError,
    MismatchError,
    NcclError,
    OutOfMemoryError,
    PeerTimeoutError,
    SystemCallError,
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
from .memory import LOCATIONS, TYPES, WholeMemory, init  # noqa: F401
# wholestore.train is the function (the module's other names are here too).
from .train import DEFAULTS as TRAIN_DEFAULTS  # noqa: F401
from .train import EpochRecord, TrainingDiverged, TrainResult, train  # noqa: F401
from . import distributed, nn  # noqa: F401,E402  (torch: on first use of nn.Embedding only)
