"""tools/quickstart.sh picks a Python that a bpy wheel exists for, or says in one line
which Python is needed and how to point the script at it."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _python(version):
    found = shutil.which(f"python{version}")
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for folder in sorted(pyenv.glob(f"{version}.*")) if pyenv.is_dir() else []:
        found = found or str(folder / "bin" / "python")
    return found


def test_without_a_supported_python_it_says_which_is_needed(tmp_path):
    other = _python("3.12")
    if other is None:
        pytest.skip("no Python 3.12 here to stand for an unsupported one")
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "quickstart.sh", tmp_path / "tools")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(other)  # the only Python on PATH: 3.12, which no bpy wheel fits
    (bin_dir / "dirname").symlink_to(shutil.which("dirname"))
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    r = subprocess.run([shutil.which("bash"), str(tmp_path / "tools" / "quickstart.sh")], capture_output=True,
                       text=True, env=env, timeout=60)
    assert r.returncode == 1
    assert "needs Python 3.11 (for bpy 5.0.1) or 3.13 (for bpy 5.2)" in r.stderr
    assert "PYTHON=/path/to/python3.11" in r.stderr
    assert not (tmp_path / ".venv").exists()
