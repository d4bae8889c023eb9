"""torchrun with its rendezvous store listening on one address only.

torch's `TCPStore` has no bind address: a single-node run would listen on every interface,
unauthenticated, while it lasts. torchrun creates its stores as multi-tenant (one server per port
and process, reused by every later store on that port), so a server created here first, on a
socket bound to the master address, is the one torchrun's rendezvous and its ranks use.

Runs inside the torchrun process: `python -m ddpdoctor.job.loopback_store ADDR PORT -- ARGS`.
If the address cannot be bound, torchrun runs unchanged and fails in its own words (a busy port
is then named by the launcher as before).
"""

from __future__ import annotations

import socket
import sys
from datetime import timedelta
from typing import Any

LISTEN_BACKLOG = 4096


def bound_socket(addr: str, port: int) -> socket.socket | None:
    """A listening socket on exactly (addr, port), or None when it cannot be had."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            addr, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV
        )[0]
        sock = socket.socket(family, kind, proto)
    except OSError:
        return None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        return None
    return sock


def serve(addr: str, port: int) -> tuple[Any, socket.socket] | None:
    """The multi-tenant store server torchrun will reuse, listening on `addr` only, with the
    socket it serves on (to be kept open as long as the store)."""
    sock = bound_socket(addr, port)
    if sock is None:
        return None
    from torch.distributed import TCPStore

    try:
        store = TCPStore(
            addr, port, None, True, timedelta(seconds=60), wait_for_workers=False,
            multi_tenant=True, master_listen_fd=sock.fileno(),
        )  # fmt: skip
    except Exception:  # noqa: BLE001 - an older torch without the fd: torchrun binds as before
        sock.close()
        return None
    return store, sock


def main(argv: list[str]) -> None:
    addr, port, sep, *rest = argv
    assert sep == "--", "usage: loopback_store ADDR PORT -- TORCHRUN_ARGS"
    served = serve(addr, int(port))
    from torch.distributed.run import main as torchrun

    try:
        torchrun(rest)
    finally:
        del served


if __name__ == "__main__":
    main(sys.argv[1:])
