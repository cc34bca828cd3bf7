#!/usr/bin/env python3
"""A TCP echo server on 127.0.0.1, speaking no protocol at all: what a
CONNECT tunnel must carry untouched.

Usage: echo_server.py PORTFILE -- listens on a free port, writes it to
PORTFILE (whole, with a newline, by a rename), and sends every connection's
bytes back as they come; once the client shuts its sending side, it shuts
its own.
"""
import os
import socket
import sys
import threading

PORTFILE = sys.argv[1]


def echo(connection):
    try:
        while True:
            data = connection.recv(65536)
            if not data:
                break
            connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        connection.close()


listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d\n" % listener.getsockname()[1])
os.rename(PORTFILE + ".tmp", PORTFILE)
while True:
    connection, _ = listener.accept()
    threading.Thread(target=echo, args=(connection,), daemon=True).start()
