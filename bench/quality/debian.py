"""Debian's own client, used to fetch a corpus's package: `apt-get download` (nothing is installed), `dpkg-deb`."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

__all__ = ["FetchError", "VersionGone", "deb_version", "download", "sha256_of", "unpack"]


class FetchError(Exception):
    """A corpus could not be fetched or was refused (the message says why)."""


class VersionGone(FetchError):
    """apt knows the package but not that version: Debian dropped it (a point release replaced it)."""


def download(package: str, version: str | None, directory: Path) -> Path:
    """`apt-get download PACKAGE=VERSION` (VERSION None: the version apt offers now) into `directory`; the .deb.
    As root a failed download refreshes the package lists once (`apt-get update`) and tries again."""
    directory.mkdir(parents=True, exist_ok=True)
    command = ["apt-get", "download", package if version is None else f"{package}={version}"]
    result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    if result.returncode != 0 and os.geteuid() == 0:
        print("apt-get download failed; running apt-get update once and retrying", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
        result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    if result.returncode != 0:
        said = result.stderr.strip()
        if version is not None and "was not found" in said:  # E: Version 'V' for 'P' was not found
            raise VersionGone(f"`{' '.join(command)}`: {said}")
        raise FetchError(f"`{' '.join(command)}` failed: {said}\nDebian's package lists are needed (`apt-get update` as root).")
    [deb] = directory.glob("*.deb")
    return deb


def deb_version(deb: Path) -> str:
    """The Version field of a .deb's control file."""
    return subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True).stdout.strip()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def unpack(deb: Path, target: Path) -> None:
    """`dpkg-deb -x` into `target` (created; must not exist)."""
    subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
