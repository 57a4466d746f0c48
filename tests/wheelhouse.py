"""A wheelhouse repacked from the packages this Python has installed, so a test can
run ``pip install`` with ``--no-index`` (no network) and still get real packages.

An installed distribution keeps every file it installed and its ``.dist-info``; a
wheel is those files zipped with a fresh RECORD. Files installed outside
site-packages (console scripts, ``../``) and bytecode are left out: pip makes them.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path, PurePath

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

# Written by the installer, not part of a wheel.
INSTALLER_FILES = {"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"}


def requirements(name: str) -> list[str]:
    """The names an installed distribution requires on this Python, extras left out."""
    needs = [Requirement(line) for line in metadata.requires(name) or []]
    return [r.name for r in needs if r.marker is None or r.marker.evaluate({"extra": ""})]


def requirements_closure(names: Iterable[str]) -> list[metadata.Distribution]:
    """The installed distributions ``names`` need, themselves included."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        key = canonicalize_name(dist.metadata["Name"])
        if key not in found:
            found[key] = dist
            todo.extend(requirements(key))
    return list(found.values())


def _own_info(path: PurePath) -> bool:
    """A file of the distribution's own .dist-info (vendored packages carry theirs)."""
    return len(path.parts) == 2 and path.parts[0].endswith(".dist-info")


def repack(dist: metadata.Distribution, dest: Path) -> Path:
    """Zip an installed distribution back into a wheel in ``dest``."""
    files = [f for f in dist.files or [] if ".." not in f.parts and "__pycache__" not in f.parts]
    wheel_file = next(f for f in files if _own_info(f) and f.name == "WHEEL")
    tag = next(
        line.split(":", 1)[1].strip()
        for line in Path(str(dist.locate_file(wheel_file))).read_text().splitlines()
        if line.startswith("Tag:")
    )
    info_dir = wheel_file.parts[0]
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    wheel = dest / f"{name}-{dist.version}-{tag}.whl"
    record = io.StringIO()
    rows = csv.writer(record, lineterminator="\n")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            if _own_info(file) and file.name in INSTALLER_FILES:
                continue
            data = Path(str(dist.locate_file(file))).read_bytes()
            archive.writestr(str(file), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            rows.writerow((str(file), f"sha256={digest.decode()}", len(data)))
        rows.writerow((f"{info_dir}/RECORD", "", ""))
        archive.writestr(f"{info_dir}/RECORD", record.getvalue())
    return wheel


def build(dest: Path, names: Iterable[str]) -> Path:
    """A find-links directory holding ``names`` and everything they require."""
    dest.mkdir(parents=True, exist_ok=True)
    for dist in requirements_closure(names):
        repack(dist, dest)
    return dest
