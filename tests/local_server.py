"""A local HTTP server over a directory, and no network at all: what download code is tested against."""
import contextlib
import functools
import http.server
import threading
import urllib.error


@contextlib.contextmanager
def serving(directory):
    """Serves `directory` on 127.0.0.1 while the block runs; yields its base URL ("http://127.0.0.1:PORT/")."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def offline_fetch(url):
    """A fetch that fails as it does without a network (name resolution)."""
    raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")
