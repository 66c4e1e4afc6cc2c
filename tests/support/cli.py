"""`ragsvc ...` run as a user runs it: a separate process, its exit status and output."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping


async def run_cli(*args: str, env: Mapping[str, str] | None = None, timeout_s: float = 90) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `python -m ragsvc.cli ARGS` with the environment plus `env`."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ragsvc.cli",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_s)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()
