"""A small HTTP proxy on 127.0.0.1 that throttles or delays some S3 requests, bounded in count and time.

It forwards each request to the upstream server on a fresh connection with `Connection: close` (so a
response is simply everything upstream sends until EOF) and closes the client connection after it.
Faults: every `every`-th request (counting from the first) gets `503 SlowDown` or is delayed by
`delay_s` before being forwarded; at most `max_faults` faults, and none after `window_s` seconds.
"""
from __future__ import annotations

import socket
import socketserver
import threading
import time
from urllib.parse import urlsplit

SLOWDOWN = (b"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s")
SLOWDOWN_BODY = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>SlowDown</Code>"
                 b"<Message>Please reduce your request rate.</Message></Error>")


def _read_head(f) -> tuple[bytes, list[bytes]] | None:
    start = f.readline()
    if not start:
        return None
    headers = []
    while True:
        line = f.readline()
        if line in (b"\r\n", b"\n", b""):
            return start, headers
        headers.append(line)


def _read_body(f, headers: list[bytes]) -> bytes:
    lower = {h.split(b":", 1)[0].strip().lower(): h.split(b":", 1)[1].strip() for h in headers if b":" in h}
    if lower.get(b"transfer-encoding", b"").lower() == b"chunked":
        out = bytearray()
        while True:
            size_line = f.readline()
            out += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the empty line
                    line = f.readline()
                    out += line
                    if line in (b"\r\n", b"\n", b""):
                        return bytes(out)
            out += f.read(size + 2)
    n = int(lower.get(b"content-length", b"0") or 0)
    return f.read(n) if n else b""


class FlakyProxy:
    def __init__(self, upstream: str, *, every: int = 3, mode: str = "slowdown", delay_s: float = 0.5,
                 max_faults: int = 20, window_s: float = 60.0) -> None:
        u = urlsplit(upstream)
        self.upstream = (u.hostname or "127.0.0.1", u.port or 80)
        self.every, self.mode, self.delay_s = every, mode, delay_s
        self.max_faults, self.window_s = max_faults, window_s
        self.requests = 0
        self.faults = 0
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                proxy._handle(self.rfile, self.wfile)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _decide(self) -> str | None:
        with self._lock:
            self.requests += 1
            if (self.faults < self.max_faults and time.monotonic() - self._t0 < self.window_s
                    and self.requests % self.every == 1 % self.every):
                self.faults += 1
                return self.mode
            return None

    def _handle(self, rfile, wfile) -> None:
        head = _read_head(rfile)
        if head is None:
            return
        start, headers = head
        if any(h.lower().startswith(b"expect:") and b"100-continue" in h.lower() for h in headers):
            # botocore waits (about 1 s) for the interim response before sending a PUT body
            wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            wfile.flush()
            headers = [h for h in headers if not h.lower().startswith(b"expect:")]
        body = _read_body(rfile, headers)
        fault = self._decide()
        if fault == "slowdown":
            wfile.write(SLOWDOWN % (len(SLOWDOWN_BODY), SLOWDOWN_BODY))
            return
        if fault == "delay":
            time.sleep(self.delay_s)
        kept = [h for h in headers if not h.lower().startswith((b"connection:", b"keep-alive:"))]
        request = start + b"".join(kept) + b"Connection: close\r\n\r\n" + body
        with socket.create_connection(self.upstream, timeout=60) as up:
            up.sendall(request)
            while True:
                chunk = up.recv(1 << 16)
                if not chunk:
                    break
                wfile.write(chunk)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
