"""torch integration: ``wholestore.nn.Embedding``, an ``nn.Module`` whose forward is the table's
lookup and whose backward hands the gradient to the table's sparse optimizer.

Importing this module does not import torch; the first use of ``Embedding`` does.

Each backward through an Embedding is one optimizer step of its table (``apply_gradients``
with the module's ``lr``), so the table's weights change during ``loss.backward()``, not in
the dense optimizer's ``step()``; a torch optimizer over ``model.parameters()`` never sees the
table (it has no torch Parameter).  With several ranks, ``apply_gradients`` is collective:
every rank must run the same number of backward passes through the module.  Gradients of
repeated indices are summed; the learning rate is ``module.lr`` at the time of the backward.
Under ``torch.compile`` the lookup runs eagerly (a graph break) and the rest of the model
compiles.
"""

_built = {}


def _build():
    if _built:
        return _built
    import torch

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
            ctx.module.table.apply_gradients(flat, grad.contiguous(), ctx.module.lr)
            return None, None, None

    # Under torch.compile the store's calls run eagerly: dynamo cannot trace into the C++
    # library, and tracing its Python wrappers fails on DLPack's device enum.  The graph breaks
    # at the lookup; the model's other layers compile as usual, and the backward through the
    # autograd.Function still hands the gradient to the table's optimizer.
    compiler = getattr(torch, "compiler", None)
    disable = getattr(compiler, "disable", None) or torch._dynamo.disable

    @disable
    def _store_forward(module, indices):
        if not torch.is_grad_enabled():
            flat = indices.reshape(-1).contiguous()
            out = torch.empty((flat.shape[0], module.table.dim), dtype=module.dtype,
                              device=indices.device)
            module.table.lookup(flat, out=out)
            return out.reshape(tuple(indices.shape) + (module.table.dim,))
        return _Lookup.apply(indices, module._anchor, module)

    class Embedding(torch.nn.Module):
        """An embedding layer over a wholestore EmbeddingTable.

        ``forward(indices)`` returns ``indices.shape + (dim,)`` rows (dtype ``dtype``, default
        the table's), on the indices' device; its backward applies the table's optimizer with
        learning rate ``lr``.  A host-located table with CPU tensors runs on CPU threads; CUDA
        tensors use the GPU path on torch's current stream.
        """

        def __init__(self, table, lr=0.01, dtype=None):
            super().__init__()
            self.table = table
            self.lr = float(lr)
            self.dtype = getattr(torch, table.dtype) if dtype is None else dtype
            # The output requires grad only when an input does; this empty tensor is that input
            # (it is no Parameter, so torch optimizers never see it).
            self._anchor = torch.empty(0, requires_grad=True)

        @property
        def num_embeddings(self):
            return self.table.rows

        @property
        def embedding_dim(self):
            return self.table.dim

        def forward(self, indices):
            return _store_forward(self, indices)

        def extra_repr(self):
            return f"{self.table.rows}, {self.table.dim}, lr={self.lr}, table={self.table!r}"

    _built["Embedding"] = Embedding
    return _built


def __getattr__(name):
    if name == "Embedding":
        return _build()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
