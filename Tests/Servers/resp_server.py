#!/usr/bin/env python3
"""A hostile Redis (RESP2) server on 127.0.0.1 for the replies redis-server
will not make.

Usage: resp_server.py MODE COMMAND PORTFILE -- listens on a free port and
writes it to PORTFILE (whole, with a newline, by a rename). Every
connection is answered command by command: COMMAND (GET: the layout record
`remote check` reads; GETRANGE: a blob's bytes `remote pull` reads) with
the MODE's reply; STRLEN and EXISTS with `:100`, another GET with a nil
bulk (no layout record), anything else with `+OK`. Modes:

  overflow   $9223372036854775807 (a bulk length whose + 2 overflows)
  huge       $10000000000 then bytes (a 10 GB bulk string)
  nested     2,000,000 nested `*1` (arrays nested past any stack)
  wide       *100000000 (a hundred million elements)
  nocrlf     a 100-byte bulk string ended by `XY` instead of CRLF
  error      an error line 60,000 characters long holding ESC and CR
  trickle    a 100-byte bulk string, one byte a second (never silent for 15 s)
"""
import socket
import socketserver
import sys
import time

MODE = sys.argv[1]
TARGET = sys.argv[2].encode().upper()


def reply():
    if MODE == "overflow":
        return [b"$9223372036854775807\r\n"]
    if MODE == "huge":
        return [b"$10000000000\r\n", b"x" * 65536]
    if MODE == "nested":
        return [b"*1\r\n" * 2_000_000, b":1\r\n"]
    if MODE == "wide":
        return [b"*100000000\r\n", b":1\r\n" * 1000]
    if MODE == "nocrlf":
        return [b"$100\r\n" + b"a" * 100 + b"XY"]
    if MODE == "error":
        return [b"-ERR \x1b[31mred\rover" + b"A" * 60000 + b"\r\n"]
    raise SystemExit(f"unknown mode {MODE}")


class Handler(socketserver.StreamRequestHandler):
    def command(self):
        """One RESP array of bulk strings, or None at the end."""
        head = self.rfile.readline()
        if not head.startswith(b"*"):
            return None
        words = []
        for _ in range(int(head[1:])):
            length = int(self.rfile.readline()[1:])
            words.append(self.rfile.read(length + 2)[:-2])
        return words

    def handle(self):
        try:
            while True:
                words = self.command()
                if words is None:
                    return
                name = words[0].upper()
                if name != TARGET:
                    self.wfile.write({b"STRLEN": b":100\r\n", b"EXISTS": b":100\r\n",
                                      b"GET": b"$-1\r\n"}.get(name, b"+OK\r\n"))
                elif MODE == "trickle":
                    for byte in b"$100\r\n" + b"a" * 100 + b"\r\n":
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(1)
                else:
                    for part in reply():
                        self.wfile.write(part)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            return


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


if __name__ == "__main__":
    server = Server(("127.0.0.1", 0), Handler)
    with open(sys.argv[3] + ".tmp", "w") as f:
        f.write(f"{server.server_address[1]}\n")
    import os
    os.rename(sys.argv[3] + ".tmp", sys.argv[3])
    server.serve_forever()
