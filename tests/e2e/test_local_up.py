"""`magnetar local up` as a user runs it: its own emulator, or an already running endpoint; Ctrl-C."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import httpx

import magnetar
from http_helpers import HTTP
from magnetar.local.cluster import free_port

BIN = Path(sys.executable).parent / "magnetar"


_LOGS: dict[int, IO[bytes]] = {}  # each local up's output, by pid


def local_up(*args: str, env: dict[str, str] | None = None, group: bool = False) -> subprocess.Popen[bytes]:
    """`magnetar local up ARGS`, its output to a temporary file: a pipe nobody reads fills up
    (64 KB of log lines on a loaded machine) and blocks the process, which then cannot stop.
    `group`: in a process group of its own, as a shell's foreground job."""
    log = tempfile.TemporaryFile()  # noqa: SIM115 - kept open for the process's life, read on failure
    proc = subprocess.Popen([str(BIN), "local", "up", *args], env={**clean_env(), **(env or {})}, stdout=log,
                            stderr=subprocess.STDOUT, process_group=0 if group else None)
    _LOGS[proc.pid] = log
    return proc


def output(proc: subprocess.Popen[bytes]) -> str:
    log = _LOGS[proc.pid]
    log.seek(0)
    return log.read().decode(errors="replace")[-30000:]


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Ctrl-C: it stops everything and exits 0. Alone it takes a few seconds; beside the rest of
    the suite on 2 cores it took over 20 s twice (and then exited 0), hence a minute."""
    proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"local up did not stop within 60 s of Ctrl-C:\n{output(proc)}") from None
    assert code == 0, output(proc)


def wait_healthy(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, output(proc)
        try:
            if HTTP.get(f"{url}/admin/v2/brokers/health", timeout=1).text == "ok":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("local up did not become healthy")


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT_URL", "MAGNETAR_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def round_trip(url: str) -> None:
    client = magnetar.Client(url)
    try:
        client.create_producer("local-up-check").send(b"ping")
        consumer = client.subscribe("local-up-check", "s", initial_position=magnetar.InitialPosition.Earliest)
        assert consumer.receive(timeout_millis=10_000).data() == b"ping"
    finally:
        client.close()


def test_local_up_starts_its_emulator_and_ctrl_c_stops_everything() -> None:
    port, aws_port = free_port(), free_port()
    proc = local_up("--port", str(port), "--pulsar-port", str(free_port()), "--aws-port", str(aws_port))
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        assert port_open(aws_port), "the embedded emulator listens on --aws-port"
        round_trip(f"http://127.0.0.1:{port}")
        stop(proc)
        time.sleep(0.5)
        assert not port_open(aws_port) and not port_open(port), "Ctrl-C stopped every process"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_ctrl_c_in_a_terminal_stops_it_in_order() -> None:
    """Ctrl-C in a terminal (`make run`, `magnetar local up`) signals every process of the job at
    once. The emulator is not one of them (a group of its own): `local up` stops its journal
    consumer's mapping and its servers first, then the emulator — no request of a stopping
    cluster meets an emulator already gone (a traceback per shard when it did)."""
    port, aws_port = free_port(), free_port()
    proc = local_up("--port", str(port), "--pulsar-port", "0", "--aws-port", str(aws_port), group=True)
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        round_trip(f"http://127.0.0.1:{port}")
        time.sleep(2)  # idle: the mapping's reads wait at the emulator for the next write
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 0, output(proc)
        assert "Traceback" not in output(proc), output(proc)
        time.sleep(0.5)
        assert not port_open(aws_port) and not port_open(port), "every process stopped"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_local_up_uses_an_already_running_endpoint() -> None:
    aws_port, port = free_port(), free_port()
    emulator = subprocess.Popen([sys.executable, "-m", "magnetar.local.emulator", "--port", str(aws_port)],
                                env=clean_env())
    proc = None
    try:
        deadline = time.monotonic() + 30
        while not port_open(aws_port) and time.monotonic() < deadline:
            time.sleep(0.1)
        proc = local_up("--port", str(port), "--pulsar-port", str(free_port()), "--aws-endpoint", f"http://127.0.0.1:{aws_port}")
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        round_trip(f"http://127.0.0.1:{port}")
        stop(proc)
        assert emulator.poll() is None, "an endpoint we did not start is left running"
    finally:
        for p in (proc, emulator):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(timeout=10)


def test_messages_survive_a_restart_of_local_up_against_the_same_emulator() -> None:
    aws_port = free_port()
    emulator = subprocess.Popen([sys.executable, "-m", "magnetar.local.emulator", "--port", str(aws_port)],
                                env=clean_env())
    procs: list[subprocess.Popen[bytes]] = []
    try:
        deadline = time.monotonic() + 30
        while not port_open(aws_port) and time.monotonic() < deadline:
            time.sleep(0.1)
        results = []
        for phase in ("before", "after"):
            port = free_port()
            proc = local_up("--port", str(port), "--pulsar-port", str(free_port()),
                            "--aws-endpoint", f"http://127.0.0.1:{aws_port}")
            procs.append(proc)
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, proc)
            client = magnetar.Client(url)
            try:
                if phase == "before":
                    client.subscribe("restart-check", "durable")  # the subscription exists before the send
                    client.create_producer("restart-check").send(b"kept across the restart")
                else:
                    consumer = client.subscribe("restart-check", "durable")
                    results.append(consumer.receive(timeout_millis=10_000).data())
            finally:
                client.close()
            stop(proc)
        assert results == [b"kept across the restart"]
    finally:
        for p in (*procs, emulator):
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)


def test_a_stop_that_hangs_is_cut_with_every_threads_stack_and_the_emulator_killed() -> None:
    """Ctrl-C always ends `local up`: past its stop deadline (here 0 s, so the cut always comes
    first) it prints what every thread was doing, kills its emulator and exits 1."""
    port, aws_port = free_port(), free_port()
    proc = local_up("--port", str(port), "--pulsar-port", "0", "--aws-port", str(aws_port),
                    env={"MAGNETAR_STOP_DEADLINE_S": "0"})
    try:
        wait_healthy(f"http://127.0.0.1:{port}", proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 1, output(proc)
        out = output(proc)
        assert "still stopping after 0 s" in out and 'File "' in out, out
        deadline = time.monotonic() + 10
        while port_open(aws_port) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not port_open(aws_port), "the emulator was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
