"""An HTTP server on 127.0.0.1 that answers every request (GET, PUT, HEAD) with one fixed status and body:
an endpoint that is not S3, or an S3 error no retry fixes. `requests` counts what reached it.

    with FixedAnswerServer(404) as server:              # a bare 404, no S3 error document
        S3FileIO(S3Options(endpoint=server.endpoint, ...))
"""
from __future__ import annotations

import http.server
import threading


def s3_error(code: str) -> bytes:
    """The body S3 sends with an error."""
    return f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>m</Message></Error>".encode()


class FixedAnswerServer:
    def __init__(self, status: int, body: bytes = b"") -> None:
        self.status, self.body, self.requests = status, body, 0
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                owner.requests += 1
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                self.send_response(owner.status)
                if owner.body:
                    self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(owner.body)))
                self.end_headers()
                self.wfile.write(owner.body)

            do_GET = do_PUT = do_HEAD = _answer  # noqa: N815

            def log_message(self, *args) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FixedAnswerServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
