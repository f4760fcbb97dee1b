"""Ctrl-C during a call that waits for other ranks: the wait ends within about 100 ms (not at
the 120 s timeout) and Python's own SIGINT handling takes over (KeyboardInterrupt), or
ws.Interrupted when the program's handler does not raise; a rank that arrives later fails at
once instead of waiting for the rank that gave up."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import free_port

# Rank 0 of a job: prints "waiting" and then waits for rank 1 in `wait`.
RANK0 = textwrap.dedent("""
    import signal, sys, time
    import wholestore as ws
    port, wait, handler = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if handler == "ignore-and-go-on":
        signal.signal(signal.SIGINT, lambda *args: None)
    else:
        # Python's own handling, even where the test runs under a launcher that ignores SIGINT
        # (a background job of a shell without job control, nohup): children inherit that.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if wait == "join":
        print("waiting", flush=True)
        ws.init(0, 2, "127.0.0.1", port, timeout=120, device=None)
    else:
        comm = ws.init(0, 2, "127.0.0.1", port, timeout=120, device=None)
        comm.barrier()
        print("waiting", flush=True)
        start = time.monotonic()
        try:
            comm.barrier()
        except ws.Interrupted as e:
            print("Interrupted after %.2f s: %s" % (time.monotonic() - start, e), flush=True)
            sys.exit(3)
    print("returned", flush=True)
""")

# Rank 1: joins, then sleeps through rank 0's barrier and calls it late.
RANK1 = textwrap.dedent("""
    import sys, time
    import wholestore as ws
    comm = ws.init(1, 2, "127.0.0.1", int(sys.argv[1]), timeout=120, device=None)
    comm.barrier()
    time.sleep(float(sys.argv[2]))
    start = time.monotonic()
    try:
        comm.barrier()
        print("late barrier returned", flush=True)
    except ws.PeerTimeoutError as e:
        print("late barrier failed after %.2f s: %s" % (time.monotonic() - start, e), flush=True)
""")


def start(script, *args):
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def interrupt_when_waiting(proc):
    """Sends SIGINT once `proc` said it is waiting (and a moment more, to be inside the wait);
    returns (exit code, output, seconds from the signal to the exit)."""
    line = proc.stdout.readline()
    assert line.strip() == "waiting", line
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, out, time.monotonic() - sent


def test_ctrl_c_while_waiting_for_a_rank_that_never_joins():
    proc = start(RANK0, free_port(), "join", "python")
    code, out, took = interrupt_when_waiting(proc)
    assert "KeyboardInterrupt" in out, out
    assert code != 0 and "returned" not in out, out
    assert took < 5, f"the interrupted process took {took:.1f} s to end"


@pytest.mark.parametrize("handler", ["python", "ignore-and-go-on"])
def test_ctrl_c_in_a_collective_ends_it_and_the_late_rank_fails_fast(handler):
    port = free_port()
    rank0 = start(RANK0, port, "barrier", handler)
    rank1 = start(RANK1, port, 3)
    try:
        code, out, took = interrupt_when_waiting(rank0)
        late, _ = rank1.communicate(timeout=60)
    finally:
        for p in (rank0, rank1):
            if p.poll() is None:
                p.kill()
    assert took < 5, f"the interrupted rank took {took:.1f} s to end: {out}"
    if handler == "python":
        assert "KeyboardInterrupt" in out, out
    else:
        # The program's handler returns: the call raises Interrupted instead.
        assert code == 3 and "Interrupted after" in out and "interrupted" in out, out
    assert "late barrier failed" in late, late
    seconds = float(late.split("failed after ")[1].split(" s")[0])
    assert seconds < 10, late
