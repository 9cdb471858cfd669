"""Start an agent inside the sandbox with the model gateway on a loopback port.

    python3 launch.py --listen PORT --socket /run/membench/gateway.sock -- AGENT ARGV...

The sandbox has no network, only its own loopback. This listens on 127.0.0.1:PORT before the
agent starts and copies every connection, both ways, to the gateway's Unix socket (bind-mounted
from the host). The agent's exit status is this program's (128+N for a signal)."""

import argparse
import socket
import subprocess
import sys
import threading


def pump(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((target, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                sock.shutdown(how)
            except OSError:
                pass


def serve(listener, socket_path):
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(socket_path)
        except OSError as exc:
            print(f"membench relay: cannot reach the gateway at {socket_path}: {exc}", file=sys.stderr, flush=True)
            client.close()
            continue
        threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
        threading.Thread(target=pump, args=(upstream, client), daemon=True).start()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", type=int, required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        parser.error("no agent command after --")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.listen))
    listener.listen(64)
    threading.Thread(target=serve, args=(listener, args.socket), daemon=True).start()
    try:
        code = subprocess.call(argv)
    except OSError as exc:
        print(f"membench launch: cannot start {argv[0]}: {exc}", file=sys.stderr, flush=True)
        code = 127
    sys.exit(128 - code if code < 0 else code)


if __name__ == "__main__":
    main()
