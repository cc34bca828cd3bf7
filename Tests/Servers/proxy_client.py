#!/usr/bin/env python3
"""Python's own HTTP clients, through a proxy, for the serve tests.

Usage:
  proxy_client.py urllib URL OUT
      urllib.request.urlopen(URL) with the proxy from http_proxy; writes the
      body to OUT and prints "STATUS X-Trove-Cache".
  proxy_client.py tunnel PROXYPORT HOST PORT SIZE
      http.client's CONNECT (set_tunnel) through 127.0.0.1:PROXYPORT to
      HOST:PORT, then SIZE bytes sent while reading what comes back, and
      the sending side shut; prints "echoed N" when the bytes that came back
      before the end are the bytes sent, else "differs N".
  proxy_client.py hold PROXYPORT HOST PORT
      opens the tunnel, sends "ping" and reads it back, prints "open", then
      waits for the tunnel to close and prints "closed".
  proxy_client.py raw PROXYPORT LINE [HEADER...]
      sends the request line LINE and the header lines, reads the answer's
      status line and prints its code.
"""
import http.client
import socket
import sys
import threading
import urllib.request


def fetch(url, out):
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            body = response.read()
            status, cache = response.status, response.headers.get("X-Trove-Cache")
    except urllib.error.HTTPError as error:
        body, status, cache = error.read(), error.code, error.headers.get("X-Trove-Cache")
    with open(out, "wb") as f:
        f.write(body)
    print(status, cache)


def tunnel(proxy_port, host, port, size):
    connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=30)
    connection.set_tunnel(host, port)
    connection.connect()
    sock = connection.sock
    payload = bytes(i * 7 % 251 for i in range(size))

    def send():
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send)
    sender.start()
    received = bytearray()
    while True:
        data = sock.recv(65536)
        if not data:
            break
        received += data
    sender.join()
    print("echoed" if bytes(received) == payload else "differs", len(received))


def hold(proxy_port, host, port):
    connection = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=60)
    connection.set_tunnel(host, port)
    connection.connect()
    sock = connection.sock
    sock.sendall(b"ping")
    echoed = b""
    while len(echoed) < 4:
        echoed += sock.recv(4 - len(echoed))
    print("open" if echoed == b"ping" else "differs", flush=True)
    while sock.recv(65536):
        pass
    print("closed", flush=True)


def raw(proxy_port, line, headers):
    sock = socket.create_connection(("127.0.0.1", proxy_port), timeout=30)
    sock.sendall((line + "\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode())
    answer = b""
    while b"\r\n" not in answer:
        data = sock.recv(4096)
        if not data:
            break
        answer += data
    print(answer.split(b" ")[1].decode() if answer else "closed")


if sys.argv[1] == "urllib":
    fetch(sys.argv[2], sys.argv[3])
elif sys.argv[1] == "hold":
    hold(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
elif sys.argv[1] == "tunnel":
    tunnel(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
else:
    raw(int(sys.argv[2]), sys.argv[3], sys.argv[4:])
