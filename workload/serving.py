"""The serving process the program starts in its own container (``vllm serve`` on loopback) and stops.

Stopping it is what frees the GPUs' memory before the result is written: the pod's GPU allocation
goes back to the node when the DaemonSet controller removes the pod (docs/validation.md, "Mechanism").
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass


@dataclass
class Serving:
    process: subprocess.Popen

    @classmethod
    def start(cls, command: list[str]) -> Serving:
        # Its own process group, so stopping it stops whatever it spawned (vLLM's engine workers).
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)  # noqa: S603
        return cls(process)

    def exited(self) -> str | None:
        code = self.process.poll()
        return None if code is None else f"exited with code {code}"

    def stop(self, grace: float = 30.0) -> None:
        if self.process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.process.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
