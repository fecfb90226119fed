"""A TCP proxy on loopback in front of the tests' S3 server, which can start hanging and stop again.

``forward`` passes bytes both ways. ``hang`` accepts connections and reads what the client sends but never answers
(a store whose network or front end has stalled): new connections hang, and so do kept-alive ones as soon as they
send anything. A connection that swallowed bytes stays hung for good (the request it carried is lost), so when the
proxy forwards again, only new connections (the client gives up on a hung one at its read timeout) reach the store.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from urllib.parse import urlsplit

__all__ = ["StoreProxy"]


class StoreProxy:
    """Listens on ``127.0.0.1`` (a free port) and forwards to ``target`` (``'http://127.0.0.1:PORT'``) while
    ``mode`` is ``'forward'``; in ``'hang'`` mode it answers nothing.

    Example::

        proxy = StoreProxy(server.endpoint_url).start()
        options = {"endpoint_url": proxy.endpoint_url, ...}
        proxy.mode = "hang"
        ...
        proxy.stop()
    """

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self._target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.mode = "forward"
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self.endpoint_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopped = False

    def start(self) -> StoreProxy:
        self._listener.listen(64)
        threading.Thread(target=self._accept, name="store-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        """Closes the listener and every connection (their threads then end)."""
        self._stopped = True
        with self._lock:
            sockets, self._sockets = [self._listener, *self._sockets], set()
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _track(self, s: socket.socket) -> None:
        with self._lock:
            if self._stopped:
                s.close()
            else:
                self._sockets.add(s)

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            self._track(client)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        if self.mode == "hang":
            self._swallow(client)
            return
        try:
            upstream = socket.create_connection(self._target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        self._track(upstream)
        threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()
        self._pipe(client, upstream, True)

    def _pipe(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        """Copies ``source`` to ``sink``; from the client, once the proxy hangs, swallows instead (for good)."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if from_client and self.mode == "hang":
                    self._swallow(source)
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    @staticmethod
    def _swallow(client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while client.recv(65536):
                pass
        client.close()
