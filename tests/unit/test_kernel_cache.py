"""CuPy's kernel cache folder: VoxFX chooses it, checks it really takes a file, falls back
to a temporary folder with one warning, and the backend names the real reason when the
GPU is not used (issue 21).

Tests run as root here, so a chmod'ed folder would still be writable: an unwritable
folder is made by putting it under a regular file, which fails for root too. CuPy is
not installed on the CPU machines, so the fake ``cupy`` packages below stand in for it in
a fresh interpreter; the one that compiles writes into ``CUPY_CACHE_DIR`` the way
``cupy.cuda.compiler._compile_with_cache_cuda`` (CuPy 13.6) does, so the hand-over
through the environment is really exercised.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from voxfx.kernels import backend, kernel_cache

ROOT = str(Path(backend.__file__).resolve().parent.parent)


@pytest.fixture(autouse=True)
def fresh_choice(monkeypatch):
    for var in (kernel_cache.ENV_VAR, kernel_cache.CUPY_ENV, kernel_cache.CUPY_IN_MEMORY_ENV):
        monkeypatch.delenv(var, raising=False)
    kernel_cache._reset_for_tests()
    yield
    kernel_cache._reset_for_tests()


def unwritable_folder(tmp_path) -> Path:
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a regular file where a folder would have to be")
    return blocker / "kernel_cache"


def test_writable_folder_is_used_and_handed_to_cupy(tmp_path):
    cache = kernel_cache.configure(tmp_path / "kernels")
    assert cache.path == tmp_path / "kernels" and cache.path.is_dir()
    assert cache.warning is None and cache.source == "VoxFX folder"
    assert os.environ["CUPY_CACHE_DIR"] == str(tmp_path / "kernels")
    assert list(cache.path.iterdir()) == []  # the write test leaves nothing behind


def test_unwritable_folder_falls_back_to_a_temporary_one_with_one_warning(tmp_path, capsys):
    wanted = unwritable_folder(tmp_path)
    cache = kernel_cache.configure(wanted)
    assert cache.path != wanted and cache.source == "temporary fallback"
    assert kernel_cache.unwritable_reason(cache.path) is None
    assert os.environ["CUPY_CACHE_DIR"] == str(cache.path)
    assert str(wanted) in cache.warning and "NotADirectoryError" in cache.warning
    assert "VOXFX_KERNEL_CACHE" in cache.warning
    kernel_cache.configure(wanted)  # the same problem again: no second message
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("VoxFX:")]
    assert len(lines) == 1 and str(wanted) in lines[0]


def test_full_disk_counts_as_unwritable(tmp_path):
    cache = kernel_cache.configure(tmp_path / "kernels", min_free_bytes=1 << 62)
    assert cache.source == "temporary fallback" and "the disk is full" in cache.warning


def test_environment_variable_wins_over_the_add_on_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(kernel_cache.ENV_VAR, str(tmp_path / "farm"))
    cache = kernel_cache.configure(tmp_path / "blender_user")
    assert cache.path == tmp_path / "farm" and cache.source == "VOXFX_KERNEL_CACHE"
    assert not (tmp_path / "blender_user").exists()


def test_a_users_cupy_cache_dir_is_respected_but_our_own_is_not_mistaken_for_it(tmp_path, monkeypatch):
    monkeypatch.setenv(kernel_cache.CUPY_ENV, str(tmp_path / "users_choice"))
    assert kernel_cache.configure(tmp_path / "ours").path == tmp_path / "users_choice"
    monkeypatch.delenv(kernel_cache.CUPY_ENV)
    assert kernel_cache.configure(tmp_path / "ours").path == tmp_path / "ours"
    # CUPY_CACHE_DIR now holds VoxFX's own value: a new preference replaces it
    assert kernel_cache.configure(tmp_path / "moved").path == tmp_path / "moved"


def test_cache_errors_are_told_apart_from_other_os_errors(tmp_path):
    kernel_cache.configure(tmp_path / "kernels")
    inside = PermissionError(13, "Permission denied", str(tmp_path / "kernels" / "tmpab12"))
    beside = PermissionError(13, "Permission denied", str(tmp_path / "kernels_old" / "x"))
    assert kernel_cache.is_cache_error(inside)
    assert not kernel_cache.is_cache_error(beside)
    assert not kernel_cache.is_cache_error(RuntimeError("CUDA_ERROR_NO_DEVICE"))


# --------------------------------------------------------------------------- reasons

FAKE_CUPY_THAT_COMPILES = '''
import os, tempfile
__version__ = "13.6.0"
float32 = "float32"

def _write_kernel(name):
    # as cupy.cuda.compiler._compile_with_cache_cuda does for a kernel not yet cached
    cache_dir = os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))
    if not os.path.isdir(cache_dir):
        os.makedirs(cache_dir, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache_dir, delete=False) as tf:
        tf.write(b"cubin")
    os.replace(tf.name, os.path.join(cache_dir, name + ".cubin"))

class _Array:
    def __init__(self, values):
        self.values = values
    def __mul__(self, other):
        _write_kernel("multiply")
        return _Array([a * b for a, b in zip(self.values, other.values)])
    def sum(self):
        _write_kernel("sum")
        return float(sum(self.values))

def arange(start, stop, dtype=None):
    return _Array(list(range(start, stop)))

class _Runtime:
    @staticmethod
    def getDeviceCount():
        return 1

class _Device:
    id = 0

class cuda:
    runtime = _Runtime()
    Device = _Device

class RawModule:
    def __init__(self, code, options=()):
        self.code = code
    def compile(self):
        _write_kernel("raw_module")
'''


def run_with_fake_cupy(tmp_path, cupy_init: str, code: str, args=(), **env):
    fake = tmp_path / "site" / "cupy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(cupy_init)
    prelude = ("import sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])\n"
               "from tools.package import load; load()\n"
               "from voxfx.kernels import backend, kernel_cache\n")
    env = {"PATH": "", "HOME": str(tmp_path / "home"), **env}
    return subprocess.run([sys.executable, "-c", prelude + code, str(tmp_path / "site"), ROOT, *args],
                          capture_output=True, text=True, env=env, timeout=120)


def test_missing_cupy_is_reported_as_not_installed():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    assert backend.probe_cuda() == (None, "CuPy is not installed")


def test_cupy_failing_at_import_is_not_reported_as_not_installed(tmp_path):
    """An unwritable home made CuPy's import raise PermissionError; the reason said
    'CuPy is not installed'. It must say CuPy is there and why it cannot be used."""
    r = run_with_fake_cupy(
        tmp_path,
        "raise PermissionError(13, 'Permission denied', '/home/artist/.cupy')\n",
        "print(backend.get_backend().reason)\n")
    assert r.returncode == 0, r.stderr
    reason = r.stdout.strip()
    assert reason.startswith("CPU backend (NumPy): CUDA not usable (CuPy is installed but cannot be imported")
    assert "PermissionError" in reason and "/home/artist/.cupy" in reason
    assert "not installed" not in reason


def test_unwritable_kernel_cache_switches_to_a_temporary_one_not_to_the_cpu(tmp_path):
    """Before: CuPy's first compile into an unwritable cache failed the probe and VoxFX
    ran on the CPU. Now the GPU is used with a temporary cache and one warning."""
    blocked = unwritable_folder(tmp_path)
    (tmp_path / "home").write_text("an unwritable home: ~/.cupy cannot be made either")
    r = run_with_fake_cupy(
        tmp_path, FAKE_CUPY_THAT_COMPILES,
        "b = backend.get_backend()\n"
        "import os; print(b.name); print(os.environ['CUPY_CACHE_DIR'])\n",
        VOXFX_KERNEL_CACHE=str(blocked))
    assert r.returncode == 0, r.stderr
    name, used = r.stdout.split()
    assert name == "gpu", r.stderr
    assert sorted(p.name for p in Path(used).iterdir()) == ["multiply.cubin", "sum.cubin"]
    warnings = [line for line in r.stderr.splitlines() if "not writable" in line]
    assert len(warnings) == 1 and str(blocked) in warnings[0], r.stderr


def test_cache_lost_mid_job_recompiles_in_a_temporary_folder(tmp_path):
    """The cache was fine when checked and became unwritable before a kernel was compiled
    (a read-only remount, a cleaner): load_module must not fail the bake with a bare
    OSError but compile into a temporary folder."""
    cache = tmp_path / "kernels"
    r = run_with_fake_cupy(
        tmp_path, FAKE_CUPY_THAT_COMPILES,
        "import os, shutil\n"
        "assert backend.get_backend().name == 'gpu'\n"
        "shutil.rmtree(sys.argv[3]); open(sys.argv[3], 'w').close()  # the folder is now a file\n"
        "backend.load_module('bitgrid.cu')\n"
        "print(os.environ['CUPY_CACHE_DIR'])\n",
        args=[str(cache)], VOXFX_KERNEL_CACHE=str(cache))
    assert r.returncode == 0, r.stderr
    used = Path(r.stdout.strip())
    assert used != cache and (used / "raw_module.cubin").is_file()
    assert "could not write its kernel cache" in r.stderr
