"""Shared fixtures: the one-rank job of the test process, and a launcher of multi-rank jobs
(real processes meeting over the TCP bootstrap, as `wholestore launch` starts them)."""

import os
import random
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


def _bindable(port):
    """Whether a listening socket could bind 127.0.0.1:port now (SO_REUSEADDR, as the job's
    store binds)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _ports_below_ephemeral():
    """Ports below the kernel's ephemeral range, or None where it leaves no room.  A port the
    kernel hands out for bind(0) can go to another process's outgoing connection before a job
    binds it; one below the range never does."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return range(10000, low - 1) if low > 11000 else None


def free_port(successor_too=False):
    """A port of 127.0.0.1 that was free a moment ago (and, with successor_too, the next one
    as well: a job beside torchrun's agent store takes MASTER_PORT + 1)."""
    ports = _ports_below_ephemeral()
    if ports is not None:
        for _ in range(200):
            port = random.choice(ports)
            if _bindable(port) and (not successor_too or _bindable(port + 1)):
                return port
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if not successor_too or _bindable(port + 1):
            return port
    raise RuntimeError("no free port found on 127.0.0.1")


def listen_with_next_port_free():
    """A socket listening on 127.0.0.1 whose port's successor was free when checked, standing
    in for torchrun's agent store (the job's own store takes the next port)."""
    agent = socket.socket()
    agent.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    agent.bind(("127.0.0.1", free_port(successor_too=True)))
    agent.listen()
    return agent


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
