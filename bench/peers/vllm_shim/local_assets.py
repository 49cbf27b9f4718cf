"""vLLM's conftest `LocalAssetServer` / `local_asset_server`: a loopback HTTP server of test assets (images, audio).

vLLM's downloads its assets from a bucket; offline there are none, so this one serves an empty folder: a URL of it
answers 404, and a case that sends one (a multimodal request, which our text model refuses anyway) fails on that.
"""

from __future__ import annotations

import functools
import http.server
import tempfile
import threading

import pytest


class LocalAssetServer:
    def __init__(self, address: str = "127.0.0.1") -> None:
        self.address = address
        self.port = -1
        self._folder = tempfile.TemporaryDirectory(prefix="peer-assets-")
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=self._folder.name)
        self.server = http.server.ThreadingHTTPServer((address, 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.port = self.server.server_address[1]
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.thread.join()
        self._folder.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://{self.address}:{self.port}"

    def url_for(self, name: str) -> str:
        return f"{self.base_url}/{name}"


@pytest.fixture(scope="session")
def local_asset_server():
    with LocalAssetServer() as server:
        yield server
