"""Runs one `pulumi` CLI command whose Pulumi program is served by the Python SDK's own language runtime.

Usage: python tests/e2e/program_host.py PULUMI_BINARY ARGS...

The Go language host `pulumi-language-python` cannot be built here: the Go module proxy serves no
version of `github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3` (docs/e2e.md). The
Python SDK ships the other language runtime Pulumi itself uses for Automation API inline programs:
`pulumi.automation._server.LanguageServer`, a gRPC LanguageRuntime that runs a program in-process.
This script serves the project's real `__main__.py` through it and hands its address to the CLI with
`--client`, exactly as the SDK's `Stack.preview()`/`Stack.up()` do; the engine, the provider, the
resource monitor and the program are the real ones. It exits with the CLI's exit code.
"""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from concurrent import futures
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def program() -> None:
    # What pulumi-language-python-exec does for a project: run __main__.py with the project on sys.path.
    runpy.run_path(str(CHECKOUT / "__main__.py"), run_name="__main__")


def main(argv: list[str]) -> int:
    import grpc
    from pulumi.automation._server import LanguageServer
    from pulumi.runtime.proto import language_pb2_grpc

    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    sys.path.insert(0, str(CHECKOUT))
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        options=[("grpc.max_receive_message_length", 400 * 1024 * 1024),
                 ("grpc.max_send_message_length", 400 * 1024 * 1024)],
    )
    language_pb2_grpc.add_LanguageRuntimeServicer_to_server(LanguageServer(program), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        command = [argv[0], *argv[1:], f"--client=127.0.0.1:{port}"]
        return subprocess.run(command, env=os.environ.copy(), check=False).returncode  # noqa: S603
    finally:
        server.stop(grace=None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
