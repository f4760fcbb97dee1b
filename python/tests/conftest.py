"""Shared fixtures: the one-rank job of the test process, and a launcher of multi-rank jobs
(real processes meeting over the TCP bootstrap, as `wholestore launch` starts them)."""

import os
import socket
import subprocess
import sys

import pytest

import wholestore as ws

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def comm():
    return ws.init(device=None)


def has_gpu():
    return ws.cuda_built() and ws.device_count() > 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listen_with_next_port_free():
    """A socket listening on 127.0.0.1 whose port's successor was free when checked, as a test
    standing in for torchrun's agent store needs (the job's own store takes the next port).  An
    ephemeral port's successor can be held by another program's connection: probe and retry."""
    for _ in range(100):
        agent = socket.socket()
        agent.bind(("127.0.0.1", 0))
        port = agent.getsockname()[1]
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                agent.close()
                continue
        agent.listen()
        return agent
    raise RuntimeError("no port with a free successor found on 127.0.0.1 in 100 tries")


def run_ranks(size, scenario, out_dir, extra_env=None, timeout=120):
    """Runs tests/multirank_worker.py SCENARIO OUT_DIR as `size` processes with the launch
    environment set; returns their outputs; fails the test when a rank fails."""
    port = free_port()
    procs = []
    for rank in range(size):
        env = dict(os.environ)
        env.update({"RANK": str(rank), "WORLD_SIZE": str(size), "LOCAL_RANK": str(rank),
                    "LOCAL_WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port), "WHOLESTORE_TIMEOUT": "60"})
        env.update(extra_env or {})
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "multirank_worker.py"), scenario, str(out_dir)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    for rank, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"rank {rank} of {scenario} did not finish in {timeout} s")
        outputs.append(out)
    for rank, p in enumerate(procs):
        if p.returncode != 0:
            pytest.fail(f"rank {rank} of {scenario} exited {p.returncode}:\n{outputs[rank]}")
    return outputs
