"""One venv per peer under .bench/venvs/, installed from bench/peers/requirements/<peer>.txt by exact pins and
reinstalled only when that file changes."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from bench.peers.workers import ROOT

REQUIREMENTS = ROOT / "bench" / "peers" / "requirements"
VENVS = ROOT / ".bench" / "venvs"


def python_of(peer: str) -> str:
    """The venv's interpreter, after creating or refreshing the venv when its requirements changed."""
    requirements = REQUIREMENTS / f"{peer}.txt"
    venv = VENVS / peer
    stamp = venv / ".requirements-sha256"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()
    python = venv / "bin" / "python"
    if not (stamp.exists() and stamp.read_text() == digest and python.exists()):
        print(f"setting up {venv.relative_to(ROOT)} from {requirements.relative_to(ROOT)}", file=sys.stderr, flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "-r", str(requirements)], check=True)
        stamp.write_text(digest)
    return str(python)
