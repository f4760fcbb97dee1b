"""What the run has: on the GPU machine (scripts/python-check.sh sets WHOLESTORE_REQUIRE_GPU=1)
a GPU, a CUDA build, torch with CUDA and CuPy must all be there, so the GPU tests cannot skip
unnoticed."""

import importlib
import os

import pytest

import wholestore as ws


@pytest.mark.skipif(os.environ.get("WHOLESTORE_REQUIRE_GPU") != "1",
                    reason="WHOLESTORE_REQUIRE_GPU=1 not set (only the GPU check needs a GPU)")
def test_gpu_run_has_everything_it_needs():
    missing = []
    if not ws.cuda_built():
        missing.append("a build with CUDA and NCCL")
    if ws.device_count() == 0:
        missing.append("a visible GPU")
    for name in ("torch", "cupy"):
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if "torch" not in str(missing):
        import torch

        if not torch.cuda.is_available():
            missing.append("torch with CUDA")
    assert not missing, "missing: " + ", ".join(missing)


def test_version_and_build():
    assert ws.__version__.count(".") == 2
    assert isinstance(ws.cuda_built(), bool)
    if not ws.cuda_built():
        assert ws.device_count() == 0
