#!/usr/bin/env python3
"""An HTTP/1.1 server on 127.0.0.1 for the faults nginx will not make.

Usage: fault_server.py LOG PORTFILE -- listens on a free port, writes it to
PORTFILE (whole, with a newline, by a rename), and appends one line per
request to LOG:
    METHOD PATH "Range" "If-Range" "If-None-Match"

Every body is deterministic: /MODE/NAME?size=N (or /MODE/size=N/NAME) serves N bytes (default
1 MiB) made from NAME, with a strong ETag "v1" and a fixed Last-Modified,
and honours Range (206) and If-None-Match (304). The MODE changes that:

  ok           as described
  drop         the first request without Range sends half the body and closes
  short        every answer sends half the body its Content-Length announces
  chunked      a chunked body without Content-Length (complete)
  chunkcut     a chunked body cut before its last chunk
  norange      ignores Range: 200 with the whole body (the first one dropped)
  badrange     the first request dropped; a Range answered 206 from byte 0
  etagchange   the first request dropped; then the ETag is "v2", the body another
  ignoreifrange  as etagchange, but a Range is honoured whatever If-Range says
  range416     the first request dropped; a Range answered 416
  novalidator  304 answers carry no ETag or Last-Modified
  wrong        one byte of the body flipped
  stall        sends 64 KiB, then nothing for 60 s
  slow         sends 64 KiB every 20 ms (to be killed mid-transfer)
  status       /status/CODE answers CODE (with Retry-After: 0)
  headers      the request's header lines, as they came, are the body
  endlessrecord  a WebDAV remote whose key records (paths with /keys/) are
               64 MiB long; anything else is 404
  errorflood   every request answered 500 with a 64 MiB body
  redirect     /redirect/NAME?to=URL (percent-encoded) answers 302 to URL;
               without ?to=, to itself
  lengths      two Content-Length headers: the body's length, and 5
  tree         /tree/PATH serves the file LOG.tree/PATH (404 when there is
               none), a Range of it as 206; beside it, PATH.fail makes it
               answer 503 at once, PATH.late makes a GET wait 1.5 s before
               answering, PATH.soon makes any request wait 0.5 s (a 503
               too), and PATH.shifted answers a Range with as many bytes
               from 4096 further on, and a Content-Range that says so; HEAD too;
               the most tree requests waiting (.late, .soon) at once is in
               LOG.busiest

Every request, whatever its method, also appends one line to LOG.headers:
METHOD PATH, a tab, and its header lines joined by " | ". A method other
than GET (or HEAD in tree) is answered 405. The modes with 64 MiB bodies log "CUT PATH" to LOG
when the client closed before the end, "SENT PATH" when it read it all.
"""
import http.server
import os
import random
import socketserver
import sys
import threading
import time
import urllib.parse

LOG = sys.argv[1]
LOCK = threading.Lock()
SEEN = {}  # path -> requests so far
IN_FLIGHT = 0  # tree requests waiting (.late, .soon)
BUSIEST = 0  # the most at once, written to LOG.busiest
LAST_MODIFIED = "Mon, 02 Nov 2026 10:00:00 GMT"


def body_for(name, size, version=1):
    return random.Random(f"{name}:{version}").randbytes(size)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def log_headers(self):
        lines = " | ".join(f"{k}: {v}" for k, v in self.headers.items())
        with LOCK:
            with open(LOG + ".headers", "a") as log:
                log.write(f"{self.command} {self.path}\t{lines}\n")

    def refuse(self):
        self.log_headers()
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        if self.path.startswith("/tree/"):
            self.log_headers()
            self.serve_tree(self.path[len("/tree/"):], head=True)
        else:
            self.refuse()

    do_PUT = do_DELETE = do_MOVE = do_MKCOL = do_PROPFIND = refuse

    def do_GET(self):
        self.log_headers()
        path, _, query = self.path.partition("?")
        params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        parts = path.strip("/").split("/")
        if len(parts) > 2 and parts[1].startswith("size="):
            # /MODE/size=N/NAME: the size in the path, for a client that drops queries.
            params.setdefault("size", parts[1][5:])
            parts = [parts[0]] + parts[2:]
        mode, name = parts[0], "/".join(parts[1:]) or "x"
        rng = self.headers.get("Range")
        with LOCK:
            count = SEEN.get(path, 0) + 1
            SEEN[path] = count
            with open(LOG, "a") as log:
                log.write(f'GET {path} "{rng or "-"}" "{self.headers.get("If-Range") or "-"}" '
                          f'"{self.headers.get("If-None-Match") or "-"}"\n')
        if mode == "errorflood" or (mode == "endlessrecord" and "/keys/" in path):
            self.flood(path, 500 if mode == "errorflood" else 200)
            return
        if mode == "endlessrecord":
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "status":
            # /status/CODE, or /status/CODE/… for a remote's files under it.
            code = int(name.split("/")[0])
            self.send_response(code)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "redirect":
            self.send_response(302)
            self.send_header("Location", urllib.parse.unquote(params.get("to", self.path)))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "tree":
            self.serve_tree(name)
            return
        if mode == "headers":
            data = str(self.headers).encode("latin-1")
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        size = int(params.get("size", 1 << 20))
        version = 2 if mode in ("etagchange", "ignoreifrange") and count > 1 else 1
        etag = f'"v{version}"'
        data = body_for(name, size, version)
        if mode == "wrong":
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        inm = self.headers.get("If-None-Match")
        if inm is not None and inm == etag:
            self.send_response(304)
            if mode != "novalidator":
                self.send_header("ETag", etag)
                self.send_header("Last-Modified", LAST_MODIFIED)
            self.end_headers()
            return
        first_plain = count == 1 and rng is None
        if mode == "range416" and rng:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{len(data)}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode in ("chunked", "chunkcut"):
            self.send_response(200)
            self.send_header("ETag", etag)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            step = 65536
            end = len(data) // 2 if mode == "chunkcut" else len(data)
            for i in range(0, end, step):
                chunk = data[i:min(i + step, end)]
                self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            if mode == "chunked":
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            return
        start = 0
        status = 200
        if rng and rng.startswith("bytes=") and mode not in ("norange",):
            if_range = self.headers.get("If-Range")
            if (if_range is None or if_range == etag or if_range == LAST_MODIFIED
                    or mode == "ignoreifrange"):
                start = int(rng[6:].split("-")[0])
                status = 206
        self.send_response(status)
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", LAST_MODIFIED)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(data) - start))
        if mode == "lengths":
            self.send_header("Content-Length", "5")
        if status == 206:
            shown = 0 if mode == "badrange" else start
            self.send_header("Content-Range", f"bytes {shown}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        payload = data[start:]
        dropping = mode == "short" or (
            first_plain and mode in ("drop", "norange", "badrange", "etagchange", "ignoreifrange",
                                     "range416"))
        if dropping:
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "stall":
            self.wfile.write(payload[:65536])
            self.wfile.flush()
            time.sleep(60)
            self.close_connection = True
            return
        if mode == "slow":
            for i in range(0, len(payload), 65536):
                self.wfile.write(payload[i:i + 65536])
                self.wfile.flush()
                time.sleep(0.02)
            return
        self.wfile.write(payload)

    def wait(self, seconds):
        """Sleeps, counted among the requests waiting at once (LOG.busiest):
        the wait lies inside the client's request, whatever it does after."""
        global IN_FLIGHT, BUSIEST
        with LOCK:
            IN_FLIGHT += 1
            if IN_FLIGHT > BUSIEST:
                BUSIEST = IN_FLIGHT
                with open(LOG + ".busiest", "w") as busiest:
                    busiest.write(f"{BUSIEST}\n")
        try:
            time.sleep(seconds)
        finally:
            with LOCK:
                IN_FLIGHT -= 1

    def serve_tree(self, name, head=False):
        file = os.path.join(LOG + ".tree", os.path.normpath(name).lstrip("/"))
        if os.path.exists(file + ".late") and not head:
            self.wait(1.5)
        if os.path.exists(file + ".soon"):
            self.wait(0.5)
        data = None
        if not os.path.exists(file + ".fail") and os.path.isfile(file):
            with open(file, "rb") as f:
                data = f.read()
        rng = self.headers.get("Range")
        if data is not None and rng and rng.startswith("bytes=") and not head:
            first, _, last = rng[6:].partition("-")
            start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
            if os.path.exists(file + ".shifted"):
                start, end = start + 4096, min(end + 4096, len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            self.wfile.write(data[start:end + 1])
            return
        self.send_response(503 if os.path.exists(file + ".fail") else 200 if data is not None else 404)
        self.send_header("Content-Length", str(len(data or b"")))
        self.end_headers()
        if not head:
            self.wfile.write(data or b"")

    def flood(self, path, code):
        """Answers `code` with a 64 MiB body; logs whether it all went."""
        self.send_response(code)
        self.send_header("Content-Length", str(64 << 20))
        self.end_headers()
        piece = b"x" * 65536
        try:
            for _ in range(1024):
                self.wfile.write(piece)
            self.wfile.flush()
            outcome = "SENT"
        except (BrokenPipeError, ConnectionResetError):
            outcome = "CUT"
        self.close_connection = True
        with LOCK:
            with open(LOG, "a") as log:
                log.write(f"{outcome} {path}\n")


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    server = Server(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(f"{server.server_address[1]}\n")
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    server.serve_forever()
