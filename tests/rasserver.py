"""A TCP server on 127.0.0.1 speaking NCCL RAS's client protocol, for the live-query tests: a real
socket that answers with real captured bytes (tests/data/nccl_ras), or a handler that misbehaves."""

from __future__ import annotations

import socket
import threading
from typing import Callable, List, Optional


class RasServer:
    """A TCP server on 127.0.0.1 that speaks RAS's client protocol (as NCCL's client_support.cc
    does) and answers ``VERBOSE STATUS`` with captured bytes, one answer per connection in turn."""

    def __init__(self, answers: List[bytes], json_ok: bool = True,
                 handler: Optional[Callable[[socket.socket], None]] = None) -> None:
        self.answers, self.json_ok, self.handler = answers, json_ok, handler
        self.commands: List[str] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.addr = "127.0.0.1:%d" % self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        n = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                if self.handler:
                    self.handler(conn)
                    continue
                f = conn.makefile("rb")
                for raw in f:
                    cmd = raw.decode().strip()
                    self.commands.append(cmd)
                    up = cmd.upper()
                    if up.startswith("CLIENT PROTOCOL "):
                        conn.sendall(b"SERVER PROTOCOL 2\n")
                    elif up.startswith("TIMEOUT "):
                        conn.sendall(b"OK\n")
                    elif up == "SET FORMAT JSON" and self.json_ok:
                        conn.sendall(b"OK\n")
                    elif up == "VERBOSE STATUS":
                        body = self.answers[min(n, len(self.answers) - 1)]
                        n += 1
                        for i in range(0, len(body), 300):  # in pieces, as NCCL sends its messages
                            conn.sendall(body[i:i + 300])
                        conn.shutdown(socket.SHUT_WR)  # the answer ends with the connection
                        break
                    else:
                        conn.sendall(("ERROR: Unknown command %s\n" % cmd).encode())
                f.close()

    def close(self) -> None:
        try:  # wakes the thread blocked in accept(): a close alone leaves the port listening until it returns
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(0.5)  # a handler that sleeps is left to end on its own (a daemon thread)
