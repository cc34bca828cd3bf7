#!/usr/bin/env python3
"""A TCP relay on 127.0.0.1: a server that can be made unreachable in the
middle of a transfer (kill the relay) and back on the same port.

Usage: tcp_relay.py TARGETPORT PORTFILE [LISTENPORT [RATE [ACCEPTLOG]]] --
listens on LISTENPORT (0: a free port), writes the port to PORTFILE (whole,
with a newline, by a rename), and relays each connection to
127.0.0.1:TARGETPORT, the client's bytes at most RATE bytes a second (0: no
limit). With ACCEPTLOG, a line is appended to that file for each connection
accepted (so a test can count the connections a client opened).
"""
import os
import socket
import sys
import threading
import time

TARGET = int(sys.argv[1])
PORTFILE = sys.argv[2]
LISTEN = int(sys.argv[3]) if len(sys.argv) > 3 else 0
RATE = int(sys.argv[4]) if len(sys.argv) > 4 else 0
ACCEPTLOG = sys.argv[5] if len(sys.argv) > 5 else None


def pump(source, sink, rate):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
            if rate:
                time.sleep(len(data) / rate)
    except OSError:
        pass
    for s in (source, sink):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client):
    upstream = socket.create_connection(("127.0.0.1", TARGET))
    upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(client, upstream, RATE), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client, 0), daemon=True).start()


listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", LISTEN))
listener.listen(64)
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d\n" % listener.getsockname()[1])
os.rename(PORTFILE + ".tmp", PORTFILE)
while True:
    connection, _ = listener.accept()
    if ACCEPTLOG:
        with open(ACCEPTLOG, "a") as log:
            log.write("accepted\n")
    serve(connection)
