"""A TCP forwarder on loopback: connections to 127.0.0.1:LISTEN go to 127.0.0.1:TARGET, byte
for byte, both ways. For the gateway's loop test: an upstream URL that names another port but
reaches the gateway itself.

  forward.py LISTEN TARGET

Prints "forwarding" once it listens; stops when its stdin closes.
"""
import socket
import sys
import threading

listen_port, target_port = int(sys.argv[1]), int(sys.argv[2])


def pipe(source, sink):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(server):
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            return
        try:
            target = socket.create_connection(("127.0.0.1", target_port))
        except OSError:
            client.close()
            continue
        threading.Thread(target=pipe, args=(client, target), daemon=True).start()
        threading.Thread(target=pipe, args=(target, client), daemon=True).start()


server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", listen_port))
server.listen(64)
threading.Thread(target=serve, args=(server,), daemon=True).start()
print("forwarding", flush=True)
sys.stdin.read()
