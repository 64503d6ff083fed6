#!/usr/bin/env python3
"""`serve.py DIR [PORT]`: DIR on http://127.0.0.1:PORT/ (default 8088), standard library only.

http.server with .wasm always served as application/wasm (WebAssembly.instantiateStreaming
refuses anything else, and Python's table depends on the machine's /etc/mime.types), and no
caching, so a rebuilt module is picked up on reload.
"""
import functools
import http.server
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".wasm": "application/wasm",
        ".js": "text/javascript",
        ".mjs": "text/javascript",
        ".json": "application/json",
    }

    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()


def main():
    if not 2 <= len(sys.argv) <= 3:
        sys.exit(__doc__.splitlines()[0])
    port = int(sys.argv[2]) if len(sys.argv) == 3 else 8088
    handler = functools.partial(Handler, directory=sys.argv[1])
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"playground: http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
