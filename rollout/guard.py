"""`gpu-rollout guard`: the stack's cluster watched without a person (checks/guard.py; docs/guard.md), with
``/metrics`` and ``/healthz`` served on ``--listen``. Runs until SIGTERM or SIGINT; each pause, failure and change of
leader is one line on stderr. Exit 2 before anything runs when the cluster is not the stack's, the stack cannot be
read, or the port cannot be bound.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType

from announcements.events import EventKind
from checks import kube as k
from checks.guard import Guard, GuardSettings
from checks.guard_metrics import render
from checks.progress import Trigger
from checks.prometheus import for_stack
from fleetspec.model import FleetSpec
from refusals.errors import FlagError
from refusals.exits import Exit
from rollout import fleet_announce
from rollout.console import say
from rollout.live import note_identity

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def address(listen: str) -> tuple[str, int]:
    """``host:port`` (``:9400`` is every address), refused naming --listen."""
    host, _, port = listen.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise FlagError("--listen", f"{listen!r} is not HOST:PORT such as 0.0.0.0:9400")
    return host.strip("[]") or "0.0.0.0", int(port)


def serve(guard: Guard, host: str, port: int) -> ThreadingHTTPServer:
    """``/metrics`` and ``/healthz`` in a thread; the server, bound (``port`` 0: any free one)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # scrapes every few seconds: not logged
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                code, body, kind = 200, render(guard).encode(), CONTENT_TYPE
            elif path == "/healthz":
                healthy = guard.healthy()
                code = 200 if healthy else 503
                body = (b"ok\n" if healthy else b"not watching, or the Lease is not current\n")
                kind = "text/plain; charset=utf-8"
            else:
                code, body, kind = 404, b"not found: /metrics, /healthz\n", "text/plain; charset=utf-8"
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type("Server", (ThreadingHTTPServer,), {"address_family": family, "daemon_threads": True})
    try:
        server = server_class((host, port), Handler)
    except OSError as error:
        raise FlagError("--listen", f"cannot listen on {host}:{port} ({error.strerror or error})") from None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def declared_deadline_minutes(spec: FleetSpec) -> float:
    """The stack's ``guard.validationDeadlineMinutes`` (30 unless it says)."""
    return float(spec.guard.validationDeadlineMinutes)


def tell_owners(kube: k.Kube, spec: FleetSpec, stack: str, triggers: list[Trigger]) -> None:
    """The model owners told that their pools paused, once per event: the first trigger is the occurrence, spelled
    as `fleet advance` spells the sign it pauses on, so whichever of the two sees it first sends it."""
    first = triggers[0]
    cause = f"{first.kind.value}: {first.message}"
    fleet_announce.tell({stack: spec}, lambda name, stack_spec: kube, f"gpu-rollout-guard/{stack}",
                        [(stack, EventKind.PAUSED, cause, cause)])


def identity() -> str:
    """Who this replica is in the leader election: the pod's name (the downward API's POD_NAME), else the host's."""
    return os.environ.get("POD_NAME") or socket.gethostname()


def execute(stack: str, spec: FleetSpec, kube: k.Kube, *, listen: str, lease_namespace: str, lease_name: str,
            settings: GuardSettings, prometheus_url: str | None = None) -> Exit:
    host, port = address(listen)
    prometheus = for_stack(spec.validation.prometheus if spec.validation else None, kube, prometheus_url)
    guard = Guard(kube, spec, stack, identity(), lease_namespace=lease_namespace, lease_name=lease_name,
                  settings=settings, prometheus=prometheus, notify=say,
                  on_pause=lambda triggers: tell_owners(kube, spec, stack, triggers))
    server = serve(guard, host, port)

    def stop(signum: int, frame: FrameType | None) -> None:
        guard.stop()

    for each in (signal.SIGTERM, signal.SIGINT):  # before anything runs: a stop while syncing is a stop too
        signal.signal(each, stop)
    try:
        guard.start()
        if guard.identity is not None:
            note_identity(guard.identity)
        say(f"guarding stack {stack} as {guard.leadership.identity} "
            f"({'leading' if guard.leadership.leader else 'following ' + str(guard.leadership.holder)}); "
            f"/metrics and /healthz on {host}:{server.server_address[1]}")
        guard.wait()
    finally:
        guard.stop()
        server.shutdown()
        server.server_close()
    say(f"guard of stack {stack} stopped")
    return Exit.OK
