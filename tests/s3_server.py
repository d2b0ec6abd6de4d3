"""A real S3-compatible server on localhost (moto's server mode) and a proxy that drops connections.

``FaultyProxy`` sits between the client and moto and cuts a connection mid-response
(an abrupt reset after ``drop_after`` bytes of a ranged GET's response) as many times as
``drops`` says: the way a flaky network or an overloaded object store drops a chunk read.
It also counts the requests passing through it (``requests``: method -> count) and can hold
each one for ``latency`` seconds before passing it on: an object store's first-byte latency
(``most_at_once``: how many were in flight together; ``rounds()``: how many round trips one
after another the requests took).
"""
from __future__ import annotations

import re
import socket
import struct
import threading
import time
from collections import Counter

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class FaultyProxy:
    def __init__(self, upstream_port: int, *, drops: int = 0, drop_after: int = 4096, latency: float = 0.0):
        self.upstream_port = upstream_port
        self.latency = latency
        self.requests: Counter = Counter()
        self.most_at_once = 0  # with a latency: the most requests held at the same time
        self.arrivals: list[float] = []  # when each request arrived (time.perf_counter)
        self._waiting = 0
        self.drops = drops
        self.drop_after = drop_after
        self.dropped = 0
        self.ranged_gets = 0
        self._lock = threading.Lock()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(64)
        self.port = self._server.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            state = {"ranged": False, "down": 0}
            threading.Thread(target=self._pump_up, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(upstream, client, state), daemon=True).start()

    def _pump_up(self, client, upstream, state) -> None:
        try:
            while data := client.recv(65536):
                methods = _REQUEST_LINE.findall(data)
                if methods:
                    with self._lock:
                        self.requests.update(m.decode() for m in methods)
                        self.arrivals += [time.perf_counter()] * len(methods)
                    if self.latency:
                        with self._lock:
                            self._waiting += 1
                            self.most_at_once = max(self.most_at_once, self._waiting)
                        time.sleep(self.latency)
                        with self._lock:
                            self._waiting -= 1
                if b"GET " in data and b"\r\nrange: bytes=" in data.lower():
                    with self._lock:
                        self.ranged_gets += 1
                    state["ranged"], state["down"] = True, 0
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(upstream)

    def _pump_down(self, upstream, client, state) -> None:
        try:
            while data := upstream.recv(65536):
                if state["ranged"]:
                    state["down"] += len(data)
                    if state["down"] > self.drop_after:
                        with self._lock:
                            drop = self.dropped < self.drops
                            if drop:
                                self.dropped += 1
                        if drop:
                            client.sendall(data[:max(1, self.drop_after - (state["down"] - len(data)))])
                            _reset(client)
                            _close(upstream)
                            return
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)

    def count(self) -> int:
        """Requests passed on so far, of every method."""
        with self._lock:
            return sum(self.requests.values())

    def rounds(self, since: int = 0) -> int:
        """Round trips one after another among the requests since the ``since``-th: a request that
        arrived once another had been held for ``latency`` (so could have had its answer) counts
        as waiting for it, one round later; requests that arrived within ``latency`` of each other
        were in flight together. Meaningful with a latency well above the machine's scheduling
        delays."""
        with self._lock:
            times = sorted(self.arrivals[since:])
        depth: list[int] = []
        for j, t in enumerate(times):
            depth.append(1 + max((depth[i] for i in range(j) if times[i] + self.latency <= t), default=0))
        return max(depth, default=0)

    def close(self) -> None:
        self._stop = True
        _close(self._server)


_REQUEST_LINE = re.compile(rb"(?:^|\r\n\r\n)(GET|HEAD|PUT|POST|DELETE) /")


def _reset(sock) -> None:
    """Abort the connection: RST on close (SO_LINGER 0)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    _close(sock)


def _close(sock) -> None:
    # shutdown first: close() alone is deferred while another thread is blocked in recv()
    # on the socket, and the peer would then never learn that the connection is gone
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass


class S3:
    """A moto server with one bucket; ``options(port)`` are the s3fs storage options for it."""

    def __init__(self, bucket: str = "data"):
        pytest.importorskip("s3fs", reason="s3fs is needed for s3:// URLs")
        pytest.importorskip("boto3", reason="boto3 (with moto) creates the bucket")
        moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed")
        self.port = free_port()
        self.server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.bucket = bucket
        import boto3
        boto3.client("s3", endpoint_url=self.endpoint(), region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket=bucket)

    def endpoint(self, port: int | None = None) -> str:
        return f"http://127.0.0.1:{port or self.port}"

    def options(self, port: int | None = None) -> dict:
        return {"key": "testing", "secret": "testing", "use_listings_cache": False,
                "client_kwargs": {"endpoint_url": self.endpoint(port), "region_name": "us-east-1"}}

    def fs(self, port: int | None = None):
        import s3fs
        return s3fs.S3FileSystem(**self.options(port))

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{name}"

    def stop(self) -> None:
        self.server.stop()
