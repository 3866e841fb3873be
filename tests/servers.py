"""Real servers on loopback for the served-model tests: llama-cpp-python's OpenAI-compatible
server running an embedded GGUF, and a fault-injecting proxy in front of it."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterator

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(
    proc: subprocess.Popen, ready: Callable[[], bool], what: str, log: Path | None = None, timeout_s: float = 120
) -> None:
    """Poll `ready()` until true; a clear error (with the log's tail) if `proc` exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        tail = f"\n{log.read_text(errors='replace')[-3000:]}" if log and log.exists() else ""
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}{tail}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up within {timeout_s:.0f} s{tail}")
        time.sleep(0.3)


def answers(url: str, **kw) -> bool:
    """Whether GET `url` returns 200 (a server still starting refuses the connection)."""
    try:
        return httpx.get(url, timeout=2, **kw).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def llama_server(
    gguf: Path, alias: str, api_key: str | None = None, log: Path | None = None, n_ctx: int = 2048
) -> Iterator[str]:
    """`python -m llama_cpp.server` on a free loopback port; yields its base URL (…/v1)."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--logits_all",
        "true",
        "--seed",
        "0",
        # the embedded backend's attention kernel (flash attention, per-row below 64 rows), so a
        # served answer differs from the embedded one only by how tokens are batched
        "--flash_attn",
        "true",
        "--n_batch",
        "60",
        "--n_ubatch",
        "60",
    ]
    if api_key:
        cmd += ["--api_key", api_key]
    out = open(log, "wb") if log else subprocess.DEVNULL
    # the server is llama-cpp-python's, run from the pinned engine's own bindings and libraries
    from evaltrail import engine

    built = engine.locate().resolve()
    env = {**os.environ, "PYTHONPATH": str(built / engine.PYTHON), "LLAMA_CPP_LIB_PATH": str(built / engine.LIB)}
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        wait_for(proc, lambda: answers(f"{url}/models", headers=headers), f"llama_cpp.server ({' '.join(cmd)})", log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if log:
            out.close()


class FaultProxy:
    """Forwards to `upstream`, but answers a seeded share of requests with a fault: HTTP 500,
    HTTP 429, a stall longer than the client's timeout, or a body cut off mid-way.

    `fail_after`: every request after that many forwarded ones gets HTTP 503 (a server that died)."""

    KINDS = ("500", "429", "timeout", "truncated")

    def __init__(self, upstream: str, rate: float, seed: int = 0, stall_s: float = 3.0, fail_after: int | None = None):
        self.upstream, self.rate, self.stall_s, self.fail_after = upstream.rstrip("/"), rate, stall_s, fail_after
        self.rng, self.lock = random.Random(seed), threading.Lock()
        self.faults = {k: 0 for k in self.KINDS}
        self.forwarded = 0
        self.auth_headers: list[str | None] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _handle(self, method: str):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    proxy.auth_headers.append(self.headers.get("Authorization"))
                    dead = proxy.fail_after is not None and proxy.forwarded >= proxy.fail_after
                    kind = None if dead or proxy.rng.random() >= proxy.rate else proxy.rng.choice(proxy.KINDS)
                    if kind:
                        proxy.faults[kind] += 1
                if dead:
                    return self._send(503, b'{"error": "down"}')
                if kind in ("500", "429"):
                    return self._send(int(kind), b'{"error": "injected"}')
                if kind == "timeout":
                    time.sleep(proxy.stall_s)
                    return self._send(504, b'{"error": "late"}')  # the client gave up already
                fwd = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type")}
                resp = httpx.request(
                    method, proxy.upstream + self.path.removeprefix("/v1"), content=body, headers=fwd, timeout=300
                )
                with proxy.lock:
                    proxy.forwarded += 1
                if kind == "truncated":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(resp.content)))
                    self.end_headers()
                    self.wfile.write(resp.content[: len(resp.content) // 2])
                    self.close_connection = True
                    return
                self._send(resp.status_code, resp.content)

            def _send(self, status: int, payload: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "FaultProxy":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
