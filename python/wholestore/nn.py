"""torch integration: ``wholestore.nn.Embedding``, an ``nn.Module`` whose forward is the table's
lookup and whose backward hands the gradient to the table's sparse optimizer, and
``wholestore.nn.SparseOptimizer``, a ``torch.optim.Optimizer`` that applies those gradients in
``step()`` with a learning rate that torch's LR schedulers drive.

Importing this module does not import torch; the first use of ``Embedding`` or
``SparseOptimizer`` does.

**Applying gradients.**  An Embedding that no SparseOptimizer holds applies each backward at
once: one optimizer step of its table (``apply_gradients`` with the module's ``lr``) during
``loss.backward()``.  Once a SparseOptimizer holds it, backward only records the gradient;
``optimizer.step()`` applies what was recorded since the last step as one ``apply_gradients``
call with the param group's ``lr`` (what ``torch.optim.lr_scheduler`` changes; gradients of
several backward passes add up), and ``zero_grad()`` drops it.  Either way a torch optimizer
over ``model.parameters()`` never sees the table (it has no torch Parameter), gradients of
repeated indices are summed, and the other hyperparameters (betas, eps, weight decay) are the
table's own.  Under ``torch.compile`` the lookup runs eagerly (a graph break) and the rest of the
model compiles.

**Several ranks.**  ``apply_gradients`` is collective: every rank runs the same number of
backward passes through a module no optimizer holds, or the same number of ``step()`` calls of
the optimizer that holds it (each step applies every module it holds, with an empty batch on a
rank that recorded nothing).

**state_dict.**  ``state_dict()`` holds the table under ``weight`` ([rows, dim], the table's
dtype: the key torch.nn.Embedding uses), ``optimizer_state.<name>`` for each state array of its
optimizer ([rows, cols] float32; see ``table.state_names``), ``optimizer_step`` and
``checkpoint_manifest``.  The table's optimizer state has no write path but its checkpoint, so
both directions go through one: ``state_dict()`` stores a checkpoint of the table into a
temporary directory and reads its files, ``load_state_dict()`` writes them back and loads it.
A round trip is bit for bit, and a table of any rank count, memory type and location loads
what any other stored (a DeviceCache over the table is flushed after loading).  The manifest
holds the arrays' checksums, so a tensor edited in the dict is refused when loading (change
rows with ``table.write_rows`` instead).

With several ranks both calls are collective, as FSDP's full state dict is: every rank calls
``state_dict()`` (``if rank == 0: torch.save(model.state_dict())`` stops at the bootstrap's
timeout; call it on every rank and save on one) and ``load_state_dict()``.  Every rank's state
dict holds the whole table, as every DDP replica's holds the whole model, so whichever rank
saves writes a complete file, and a job of any size loads it.  ``state_dict_rank0_only=True``
leaves the table out of the other ranks' dicts, for tables too large to hold once per rank.
``load_state_dict`` loads rank 0's entries into the table on every rank; the other ranks pass
the same dict, or one without the table (strict=False).  Rank 0 makes the temporary directory
under ``state_dict_dir`` (default: the system's temporary directory); every rank must see that
directory, so a job over several hosts names one on a shared file system.
"""

import contextlib
import os
import shutil
import tempfile
import weakref

_built = {}

#: state_dict entries besides the optimizer state arrays.
_WEIGHT, _STEP, _MANIFEST = "weight", "optimizer_step", "checkpoint_manifest"
_STATE_PREFIX = "optimizer_state."


def _manifest_files(manifest_text):
    """{array name: file name} from a store manifest (docs/architecture.md, "File IO")."""
    names, files = {}, {}
    for line in manifest_text.splitlines():
        key, _, value = line.partition(": ")
        parts = key.split(".")
        if len(parts) == 3 and parts[0] == "array" and parts[2] in ("name", "file"):
            (names if parts[2] == "name" else files)[parts[1]] = value
    return {names[i]: files[i] for i in names if i in files}


@contextlib.contextmanager
def _shared_directory(comm, root, payload=b""):
    """A fresh directory made by rank 0 under ``root``, with every rank's ``payload``: yields
    (path, payloads).  Removed when every rank has left the block.  Collective."""
    several = comm.size > 1
    if several and comm.num_hosts > 1 and root is None:
        raise ValueError("a table over several hosts needs state_dict_dir: a directory on a "
                         "file system every host sees (its checkpoint passes through it)")
    mine = b""
    path = None
    if comm.rank == 0:
        try:
            path = tempfile.mkdtemp(prefix="wholestore-state-", dir=root)
            mine = b"P" + path.encode()
        except OSError as e:
            mine = b"E" + str(e).encode()
    payloads = [payload]
    if several:
        replies = comm.allgather_bytes(mine + b"\0" + payload)
        mine = replies[0].split(b"\0", 1)[0]
        payloads = [r.split(b"\0", 1)[1] for r in replies]
    if mine[:1] == b"E":
        raise OSError(f"rank 0 could not make a directory under "
                      f"{root or tempfile.gettempdir()}: {mine[1:].decode()}")
    path = mine[1:].decode()
    try:
        yield path, payloads
    finally:
        if several and not comm.broken:
            with contextlib.suppress(Exception):
                comm.allgather_bytes(b"")  # every rank is done with the files
        if comm.rank == 0:
            shutil.rmtree(path, ignore_errors=True)


def _build():
    if _built:
        return _built
    import numpy as np
    import torch

    from .embedding import DeviceCache

    class _Lookup(torch.autograd.Function):
        @staticmethod
        def forward(ctx, indices, anchor, module):
            flat = indices.reshape(-1)
            if flat.dtype not in (torch.int32, torch.int64):
                flat = flat.to(torch.int64)
            flat = flat.contiguous()
            out = torch.empty((flat.shape[0], module.table.dim), dtype=module.dtype,
                              device=indices.device)
            module.table.lookup(flat, out=out)
            ctx.module = module
            ctx.save_for_backward(flat)
            return out.reshape(tuple(indices.shape) + (module.table.dim,))

        @staticmethod
        def backward(ctx, grad):
            (flat,) = ctx.saved_tensors
            grad = grad.reshape(-1, ctx.module.table.dim)
            if grad.dtype not in (torch.float32, torch.float16, torch.bfloat16):
                grad = grad.to(torch.float32)
            ctx.module._take_gradient(flat, grad.contiguous())
            return None, None, None

    # Under torch.compile the store's calls run eagerly: dynamo cannot trace into the C++
    # library, and tracing its Python wrappers fails on DLPack's device enum.  The graph breaks
    # at the lookup; the model's other layers compile as usual, and the backward through the
    # autograd.Function still hands the gradient to the table's optimizer.
    compiler = getattr(torch, "compiler", None)
    disable = getattr(compiler, "disable", None) or torch._dynamo.disable

    @disable
    def _store_forward(module, indices):
        module._grad_device = indices.device
        if not torch.is_grad_enabled():
            flat = indices.reshape(-1).contiguous()
            out = torch.empty((flat.shape[0], module.table.dim), dtype=module.dtype,
                              device=indices.device)
            module.table.lookup(flat, out=out)
            return out.reshape(tuple(indices.shape) + (module.table.dim,))
        return _Lookup.apply(indices, module._anchor, module)

    def _finish_gpu_work():
        # Checkpoints read and write the table's memory without a stream: updates enqueued on
        # torch's streams finish first.
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def _backing_table(module):
        t = module.table
        return t.table if isinstance(t, DeviceCache) else t

    def _expected_keys(table):
        return [_WEIGHT, _STEP, _MANIFEST] + [_STATE_PREFIX + n for n in table.state_names]

    def _array_spec(table, key):
        """(dtype, shape) of the state_dict entry ``key`` of an array."""
        if key == _WEIGHT:
            return getattr(torch, table.dtype), (table.rows, table.dim)
        return torch.float32, (table.rows, table._t.state_cols(key[len(_STATE_PREFIX):]))

    def _array_name(key):
        """The checkpoint's name of the array under state_dict key ``key``."""
        return "weights" if key == _WEIGHT else key[len(_STATE_PREFIX):]

    def _read_checkpoint(table, ckpt):
        with open(os.path.join(ckpt, "manifest"), "rb") as f:
            manifest = f.read()
        files = _manifest_files(manifest.decode())
        out = {}
        for key in _expected_keys(table):
            if key in (_STEP, _MANIFEST):
                continue
            dtype, shape = _array_spec(table, key)
            data = np.fromfile(os.path.join(ckpt, files[_array_name(key)]), dtype=np.uint8)
            out[key] = torch.from_numpy(data).view(dtype).reshape(shape)
        out[_STEP] = torch.tensor(table.step, dtype=torch.int64)
        out[_MANIFEST] = torch.from_numpy(np.frombuffer(manifest, dtype=np.uint8).copy())
        return out

    def _write_checkpoint(ckpt, entries):
        os.makedirs(ckpt)
        manifest = entries[_MANIFEST].detach().cpu().contiguous().numpy().tobytes()
        with open(os.path.join(ckpt, "manifest"), "wb") as f:
            f.write(manifest)
        files = _manifest_files(manifest.decode(errors="replace"))
        for key, value in entries.items():
            if key in (_STEP, _MANIFEST) or _array_name(key) not in files:
                continue  # a manifest without the array: load_checkpoint names it
            data = value.detach().cpu().contiguous()
            data = data.reshape(-1).view(torch.uint8).numpy()
            data.tofile(os.path.join(ckpt, files[_array_name(key)]))

    def _check_entries(table, entries, prefix):
        """torch-style messages for entries that cannot be the table's."""
        errors = []
        for key, value in entries.items():
            if not isinstance(value, torch.Tensor):
                errors.append(f"{prefix}{key} is a {type(value).__name__}, not a tensor")
            elif key == _MANIFEST:
                if value.dtype != torch.uint8 or value.dim() != 1:
                    errors.append(f"{prefix}{key} must be a 1-D uint8 tensor (the checkpoint's "
                                  f"manifest), got {value.dtype} of shape {tuple(value.shape)}")
            elif key == _STEP:
                if value.numel() != 1 or value.dtype.is_floating_point or int(value) < 0:
                    errors.append(f"{prefix}{key} must be one count, got {value!r}")
            else:
                dtype, shape = _array_spec(table, key)
                if tuple(value.shape) != shape or value.dtype != dtype:
                    errors.append(f"size mismatch for {prefix}{key}: copying {value.dtype} of "
                                  f"shape {tuple(value.shape)}, the table holds {dtype} of "
                                  f"shape {shape}")
        return errors

    def _store_state(module):
        table = _backing_table(module)
        comm = table.comm
        _finish_gpu_work()
        with _shared_directory(comm, module.state_dict_dir) as (path, _):
            ckpt = os.path.join(path, "table")
            table.store_checkpoint(ckpt)
            if module.state_dict_rank0_only and comm.rank != 0:
                return {}
            return _read_checkpoint(table, ckpt)

    def _load_state(module, entries, prefix, error_msgs):
        """Loads rank 0's ``entries`` (None: it has none) into the table on every rank."""
        table = _backing_table(module)
        comm = table.comm
        if entries is None and comm.size == 1:
            return
        payload = b"-" if entries is None else b"%d" % int(entries[_STEP])
        _finish_gpu_work()
        with _shared_directory(comm, module.state_dict_dir, payload) as (path, payloads):
            if payloads[0] == b"-":
                return  # rank 0 loads nothing, so no rank does
            ckpt = os.path.join(path, "table")
            failure = b""
            if comm.rank == 0:
                try:
                    _write_checkpoint(ckpt, entries)
                except OSError as e:
                    failure = str(e).encode() or b"OSError"
            if comm.size > 1:
                failure = comm.allgather_bytes(failure)[0]  # the files are complete, or not
            if failure:
                raise OSError(f"rank 0 could not write {prefix or 'the table'}'s checkpoint "
                              f"under {path}: {failure.decode()}")
            try:
                table.load_checkpoint(ckpt)
            except ValueError as e:  # LogicError: the checkpoint is not this table's
                hint = (" (a tensor of the state dict changed after state_dict(): change rows "
                        "with table.write_rows)" if "checksum" in str(e) else "")
                error_msgs.append(f"{prefix or 'the table'}: {e}{hint}")
                return
            table.step = int(payloads[0])
        if module.table is not table:
            module.table.flush()  # a DeviceCache: its rows are the table's again

    class Embedding(torch.nn.Module):
        """An embedding layer over a wholestore EmbeddingTable (or a DeviceCache of one).

        ``forward(indices)`` returns ``indices.shape + (dim,)`` rows (dtype ``dtype``, default
        the table's), on the indices' device; its backward applies the table's optimizer with
        learning rate ``lr``, or records the gradient for the SparseOptimizer that holds the
        module (the module's docstring).  A host-located table with CPU tensors runs on CPU
        threads; CUDA tensors use the GPU path on torch's current stream.
        ``state_dict_dir`` and ``state_dict_rank0_only``: where state_dict's temporary
        checkpoint goes and which ranks' dicts hold the table (the module's docstring).
        """

        def __init__(self, table, lr=0.01, dtype=None, *, state_dict_dir=None,
                     state_dict_rank0_only=False):
            super().__init__()
            self.table = table
            self._lr = float(lr)
            self.dtype = getattr(torch, table.dtype) if dtype is None else dtype
            self.state_dict_dir = None if state_dict_dir is None else os.fspath(state_dict_dir)
            self.state_dict_rank0_only = bool(state_dict_rank0_only)
            # The output requires grad only when an input does; this empty tensor is that input
            # (no Parameter, so torch optimizers never see it; SparseOptimizer's param groups
            # hold it to name the module).
            self._anchor = torch.empty(0, requires_grad=True)
            self._optimizer = None  # weakref to the SparseOptimizer that holds the module
            self._pending = []  # (indices, grads) recorded since that optimizer's last step
            # Where the last forward ran: an empty step of a rank that recorded nothing takes
            # the same path (CPU or GPU) as the other ranks'.
            self._grad_device = torch.device(
                "cuda" if isinstance(table, DeviceCache) or table.location == "device" else "cpu")

        @property
        def num_embeddings(self):
            return self.table.rows

        @property
        def embedding_dim(self):
            return self.table.dim

        @property
        def optimizer(self):
            """The SparseOptimizer that holds the module, or None."""
            return None if self._optimizer is None else self._optimizer()

        @property
        def lr(self):
            """The learning rate of the next update: the param group's when an optimizer holds
            the module (setting it sets the group's), else the module's own."""
            opt = self.optimizer
            return self._lr if opt is None else opt._group_of(self)["lr"]

        @lr.setter
        def lr(self, value):
            opt = self.optimizer
            if opt is None:
                self._lr = float(value)
            else:
                opt._group_of(self)["lr"] = float(value)

        def forward(self, indices):
            return _store_forward(self, indices)

        def extra_repr(self):
            return f"{self.table.rows}, {self.table.dim}, lr={self.lr}, table={self.table!r}"

        def _take_gradient(self, indices, grads):
            if self.optimizer is None:
                self.table.apply_gradients(indices, grads, self._lr)
            else:
                self._pending.append((indices, grads))

        def _apply_pending(self, lr):
            pending, self._pending = self._pending, []
            if not pending:
                indices = torch.empty(0, dtype=torch.int64, device=self._grad_device)
                grads = torch.empty((0, self.table.dim), dtype=torch.float32,
                                    device=self._grad_device)
            elif len(pending) == 1:
                indices, grads = pending[0]
            else:
                indices = torch.cat([i.to(torch.int64) for i, _ in pending])
                dtypes = {g.dtype for _, g in pending}
                grads = torch.cat([g if len(dtypes) == 1 else g.to(torch.float32)
                                   for _, g in pending])
            self.table.apply_gradients(indices, grads, lr)

        def _save_to_state_dict(self, destination, prefix, keep_vars):
            super()._save_to_state_dict(destination, prefix, keep_vars)
            for key, value in _store_state(self).items():
                destination[prefix + key] = value

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                  missing_keys, unexpected_keys, error_msgs):
            table = _backing_table(self)
            keys = _expected_keys(table)
            ours = {k: state_dict[prefix + k] for k in keys if prefix + k in state_dict}
            # The rest goes to torch's own loader, which reports keys no one expects.
            rest = {k: v for k, v in state_dict.items()
                    if not (k.startswith(prefix) and k[len(prefix):] in keys)}
            super()._load_from_state_dict(rest, prefix, local_metadata, strict, missing_keys,
                                          unexpected_keys, error_msgs)
            missing = [prefix + k for k in keys if k not in ours]
            if ours and missing:
                error_msgs.append(f"{prefix or 'the table'}: the state dict holds part of a "
                                  f"table, missing {', '.join(missing)}")
            elif missing and strict:
                missing_keys.extend(missing)
            errors = _check_entries(table, ours, prefix) if not missing else []
            error_msgs.extend(errors)
            _load_state(self, ours if not missing and not errors else None, prefix, error_msgs)

    def _embeddings(params, where):
        """The Embedding modules in ``params``: an Embedding, a Module holding some, or an
        iterable of those."""
        if isinstance(params, Embedding):
            return [params]
        if isinstance(params, torch.nn.Module):
            found = [m for m in params.modules() if isinstance(m, Embedding)]
            if not found:
                raise ValueError(f"{where}: {type(params).__name__} holds no "
                                 "wholestore.nn.Embedding")
            return found
        if isinstance(params, (torch.Tensor, str, bytes)) or not hasattr(params, "__iter__"):
            hint = (" (wrap a table in wholestore.nn.Embedding)"
                    if type(params).__name__ in ("EmbeddingTable", "DeviceCache") else "")
            raise TypeError(f"{where}: expected wholestore.nn.Embedding modules, got "
                            f"{type(params).__name__}{hint}")
        out = []
        for p in params:
            out.extend(_embeddings(p, where))
        return out

    class SparseOptimizer(torch.optim.Optimizer):
        """The update of ``wholestore.nn.Embedding`` tables as a torch optimizer.

        ``params``: an Embedding, a model (every Embedding in it), an iterable of those, or
        param groups (dicts whose ``params`` are such, with their own ``lr``).  Each group has
        ``lr`` (default ``lr``): backward through a held module records its gradient, and
        ``step()`` applies each held module's recorded gradients as one ``apply_gradients``
        with its group's lr (an empty one where nothing was recorded: collective with several
        ranks); ``zero_grad()`` drops recorded gradients.  LR schedulers change the groups'
        ``lr`` as for any torch optimizer, and ``state_dict()`` holds them; the table's
        optimizer state (moments, step) lives with the table and is in the module's
        state_dict.  A module belongs to one SparseOptimizer at a time; when that optimizer is
        gone, the module applies each backward at once again.
        """

        def __init__(self, params, lr=0.01):
            lr = float(lr)
            if not lr > 0 or lr == float("inf"):
                raise ValueError(f"lr must be positive and finite, got {lr}")
            self._modules_by_anchor = {}
            if isinstance(params, torch.nn.Module):
                groups = [{"params": params}]
            else:
                if isinstance(params, (torch.Tensor, str, bytes)) or not hasattr(
                        params, "__iter__"):
                    _embeddings(params, "SparseOptimizer")  # raises the TypeError
                items = list(params)
                groups = items if items and all(isinstance(g, dict) for g in items) \
                    else [{"params": items}]
            super().__init__(groups, {"lr": lr})

        def add_param_group(self, param_group):
            """Adds a group: a dict whose ``params`` are Embedding modules (or a model)."""
            group = dict(param_group)
            modules = _embeddings(group.get("params", []), "SparseOptimizer")
            if not modules:
                raise ValueError("SparseOptimizer: a param group without Embedding modules")
            for m in modules:
                holder = m.optimizer
                if holder is not None and holder is not self:
                    raise ValueError(f"{m!r} is already held by another SparseOptimizer")
            group["params"] = [m._anchor for m in modules]
            super().add_param_group(group)
            for m in modules:
                self._modules_by_anchor[id(m._anchor)] = m
                m._optimizer = weakref.ref(self)

        def _group_of(self, module):
            for group in self.param_groups:
                if any(p is module._anchor for p in group["params"]):
                    return group
            raise ValueError(f"{module!r} is not in this SparseOptimizer's param groups")

        def step(self, closure=None):
            """Applies every held module's recorded gradients with its group's lr.  Collective
            with several ranks.  Returns the closure's loss, if given."""
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for anchor in group["params"]:
                    self._modules_by_anchor[id(anchor)]._apply_pending(group["lr"])
            return loss

        def zero_grad(self, set_to_none=True):
            """Drops the gradients recorded since the last step."""
            super().zero_grad(set_to_none)
            for module in self._modules_by_anchor.values():
                module._pending = []

    _built["Embedding"] = Embedding
    _built["SparseOptimizer"] = SparseOptimizer
    return _built


def __getattr__(name):
    if name in ("Embedding", "SparseOptimizer"):
        return _build()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
