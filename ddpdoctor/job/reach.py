"""`--localize`'s probe: every node of the job connects to every other over TCP, on the names
the job resolves (the path torchrun's store and gloo take), under one deadline, and then tells
the peers it reached what it saw. No torch and no rendezvous: it works when the job cannot form.

Every node runs the same two phases, started at about the same moment (each after its own
failed run), so nodes may be a deadline apart at most:

1. reach (until `deadline_s`): a listener answers hellos; each peer is tried until it answers
   or the deadline passes, and the last error is kept ("refused": the host is up and nothing
   listens; "unreachable": no route, or no answer at all).
2. share (until 2 × `deadline_s`): this node's row goes to each peer it reached; it waits for
   the rows of those peers. A node never learns the rows of nodes it cannot reach.

A pair reached in either direction is a working pair (TCP needs both directions). Messages
are one JSON line each and carry the job's nonce, so another job's probe is ignored."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

OK, REFUSED, UNREACHABLE, NO_ADDRESS = "ok", "refused", "unreachable", "no-address"
RETRY_S = 0.3
MAX_LINE = 1 << 20
MAX_PARALLEL = 64


@dataclass
class Probe:
    """What one node saw: its own row and the rows its peers sent ({peer: status})."""

    me: str
    hosts: list[str]
    rows: dict[str, dict[str, str]] = field(default_factory=dict)
    listen_error: str | None = None
    duration_s: float = 0.0


def _classify(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return REFUSED
    if isinstance(exc, socket.gaierror):
        return NO_ADDRESS
    if isinstance(exc, OSError) and exc.errno in (errno.EHOSTUNREACH, errno.ENETUNREACH):
        return UNREACHABLE
    return UNREACHABLE  # a timeout, a reset: nothing answered


def _exchange(host: str, port: int, message: dict, timeout: float) -> dict:
    """One request, one reply line."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall((json.dumps(message) + "\n").encode())
        with s.makefile("rb") as fh:
            line = fh.readline(MAX_LINE)
    if not line:
        raise ConnectionResetError("no reply")
    return json.loads(line)


class _Listener:
    """Answers hellos and stores the rows peers send, on its own thread, until closed."""

    def __init__(self, me: str, nonce: str, port: int, bind: str) -> None:
        self.me, self.nonce = me, nonce
        self.hello_from: set[str] = set()
        self.rows: dict[str, dict[str, str]] = {}
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((bind, port))
            self.sock.listen(128)
        except OSError:
            self.sock.close()
            raise
        self.sock.settimeout(0.2)
        self.closed = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True, name="ddpdoctor-reach")
        self.thread.start()

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _addr = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            with contextlib.suppress(OSError, ValueError), conn:
                conn.settimeout(2.0)
                with conn.makefile("rb") as fh:
                    msg = json.loads(fh.readline(MAX_LINE) or b"{}")
                if not isinstance(msg, dict) or msg.get("nonce") != self.nonce:
                    continue
                sender = str(msg.get("from", ""))
                with self.lock:
                    self.hello_from.add(sender)
                    if msg.get("kind") == "row" and isinstance(msg.get("row"), dict):
                        self.rows[sender] = {str(k): str(v) for k, v in msg["row"].items()}
                conn.sendall((json.dumps({"nonce": self.nonce, "from": self.me}) + "\n").encode())

    def close(self) -> None:
        self.closed.set()
        self.thread.join(timeout=2)
        self.sock.close()


def probe(
    me: str,
    hosts: list[str],
    port: int,
    nonce: str,
    deadline_s: float,
    bind: str = "",
    resolve: dict[str, str] | None = None,
) -> Probe:
    """Both phases from this node; bounded by 2 × `deadline_s` plus one connect timeout.
    `resolve` maps a host name to the address to dial (tests on loopback); by default the
    name is dialled as it is, through the resolver the job uses."""
    started = time.monotonic()
    peers = [h for h in hosts if h != me]
    result = Probe(me=me, hosts=list(hosts))
    try:
        listener: _Listener | None = _Listener(me, nonce, port, bind)
    except OSError as exc:
        listener, result.listen_error = None, f"cannot listen on port {port}: {exc.strerror}"
    row: dict[str, str] = {}
    reach_end = started + deadline_s
    addr = (resolve or {}).get

    def heard(peer: str) -> bool:
        return listener is not None and peer in listener.hello_from

    def reach(peer: str) -> str:
        last = UNREACHABLE
        while True:
            if heard(peer):
                return OK
            left = reach_end - time.monotonic()
            if left <= 0:
                return last
            try:
                reply = _exchange(
                    addr(peer, peer),
                    port,
                    {"nonce": nonce, "from": me, "kind": "hello"},
                    min(2.0, left),
                )
                if reply.get("nonce") == nonce:
                    return OK
            except (OSError, ValueError) as exc:
                last = _classify(exc)
            time.sleep(min(RETRY_S, max(0.0, reach_end - time.monotonic())))

    workers = max(1, min(MAX_PARALLEL, len(peers)))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        row = dict(zip(peers, pool.map(reach, peers), strict=True))
    for peer in peers:  # a hello that came in while our own attempts failed still proves the pair
        if heard(peer):
            row[peer] = OK
    result.rows[me] = row

    share_end = reach_end + deadline_s
    reached = [p for p in peers if row[p] == OK]

    def share(peer: str) -> None:
        while time.monotonic() < share_end:
            with contextlib.suppress(OSError, ValueError):
                msg = {"nonce": nonce, "from": me, "kind": "row", "row": row}
                _exchange(addr(peer, peer), port, msg, 2.0)
                return
            time.sleep(RETRY_S)

    with ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, len(reached)))) as pool:
        list(pool.map(share, reached))
    if listener is not None:
        while time.monotonic() < share_end:
            with listener.lock:
                if all(p in listener.rows for p in reached):
                    break
            time.sleep(0.1)
        with listener.lock:
            result.rows.update({p: r for p, r in listener.rows.items() if p in peers})
        listener.close()
    result.duration_s = round(time.monotonic() - started, 2)
    return result
