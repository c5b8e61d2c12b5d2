"""A tiny pure-Python wheel, written by hand per the wheel format (PEP 427), that stands
in for CuPy where a test installs, imports and removes GPU support: the install path is
the same for any wheel, and the real CuPy (100+ MB, needs a GPU) cannot be used here."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def make_wheel(folder: Path, name: str = "voxfx_gpu_standin", version: str = "1.0",
               requires: tuple[str, ...] = (), tag: str = "py3-none-any") -> Path:
    """Write ``<name>-<version>-<tag>.whl`` into *folder*; its module ``<name>`` has
    ``VERSION`` and ``WHERE = __file__``. *tag* can name a platform (the files stay pure
    Python) to stand in for CuPy's per-platform wheels."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": f"VERSION = {version!r}\nWHERE = __file__\n",
        f"{info}/METADATA": "Metadata-Version: 2.1\n"
                            f"Name: {name.replace('_', '-')}\nVersion: {version}\n"
                            + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: voxfx-tests\nRoot-Is-Purelib: true\nTag: {tag}\n",
    }
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    wheel = folder / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in files.items():
            z.writestr(path, text)
    return wheel
