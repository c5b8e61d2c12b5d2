"""Install GPU support with pip, as a job: ``install_steps`` yields (fraction, message)
for the job runner (progress bar, Esc cancels) and writes pip's whole output into
``install.log`` in the GPU support folder.

Two pip runs with Blender's own Python (``sys.executable``):

1. ``pip install --dry-run --report`` resolves the requirements against Blender's Python
   as it is, so what Blender already has (its numpy) is kept and only the rest is listed;
2. ``pip install --no-deps --target <folder>`` installs exactly that list.

(``--target`` alone would install a second numpy into the folder: pip ignores what is
installed when it has a target.) Offline: ``--no-index --find-links <wheels folder>``.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from ...kernels.errors import VoxFXError
from . import folder as gpu_folder

PIP_OPTIONS = ("--disable-pip-version-check", "--no-input", "--timeout", "15", "--retries", "1")
# pip's words for "the network is not there" (urllib3 / requests / socket errors)
OFFLINE_SIGNS = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
                 "Name or service not known", "nodename nor servname", "Network is unreachable",
                 "ConnectTimeoutError", "ProxyError", "Could not fetch URL", "getaddrinfo failed")


class InstallError(VoxFXError):
    """pip could not install GPU support; the message says why in one line."""


def pip_command(python: str, *args: str) -> list[str]:
    return [python, "-m", "pip", *args, *PIP_OPTIONS]


def source_options(wheels_dir: str | os.PathLike | None) -> list[str]:
    if not wheels_dir:
        return []
    wheels = Path(wheels_dir)
    if not wheels.is_dir():
        raise InstallError(f"the wheels folder {wheels} does not exist")
    return ["--no-index", "--find-links", str(wheels)]


def install_steps(target: Path, requirements, wheels_dir=None, python: str | None = None):
    """A job: install *requirements* into *target* (made and marked if needed).
    Returns the list of 'name version' installed."""
    python = python or sys.executable
    target = gpu_folder.prepare(target)
    log_path = target / gpu_folder.LOG_NAME
    sources = source_options(wheels_dir)
    plan_file = target / ".pip-plan.json"
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"\n=== VoxFX GPU support install, {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        resolving = "resolving " + ", ".join(requirements)
        yield 0.0, resolving
        resolve = pip_command(python, "install", "--dry-run", "--quiet", "--report", str(plan_file),
                              *sources, *requirements)
        yield from run_pip(resolve, log, log_path, wheels_dir, 0.0, 0.2, expected=1, message=resolving)
        try:
            report = json.loads(plan_file.read_text(encoding="utf-8"))
        finally:
            plan_file.unlink(missing_ok=True)
        pins = [f"{item['metadata']['name']}=={item['metadata']['version']}" for item in report.get("install", [])]
        if not pins:
            log.write("nothing to install: Blender's Python already has all of it\n")
            return []
        log.write("installing: " + " ".join(pins) + "\n")
        install = pip_command(python, "install", "--no-deps", "--upgrade", "--target", str(target),
                              *sources, *pins)
        yield from run_pip(install, log, log_path, wheels_dir, 0.2, 1.0, expected=len(pins),
                           message="installing " + ", ".join(pins))
    return [pin.replace("==", " ") for pin in pins]


def run_pip(command, log, log_path, wheels_dir, start: float, end: float, expected: int, message: str):
    """Run pip, copying its output into *log*; yield (fraction, line) as it goes and at
    least every 0.1 s (so the interface stays live and Esc works while pip downloads)."""
    log.write("$ " + subprocess.list2cmdline(command) + "\n")
    log.flush()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if sys.flags.no_user_site:  # pip must see the packages Blender sees, no more
        env["PYTHONNOUSERSITE"] = "1"
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                encoding="utf-8", errors="replace", env=env)
    except OSError as e:
        raise InstallError(f"cannot run Blender's Python for pip ({type(e).__name__}: {e})") from e
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_forward_lines, args=(proc.stdout, lines), daemon=True).start()
    fraction, seen, output = start, 0, []
    try:
        while True:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                yield fraction, message
                continue
            if line is None:
                break
            log.write(line)
            log.flush()
            line = line.strip()
            if not line:
                continue
            output.append(line)
            if line.startswith(("Collecting", "Processing")):  # one per package
                seen += 1
                fraction = start + (end - start) * 0.8 * min(seen / max(expected, 1), 1.0)
            elif line.startswith("Installing collected packages"):
                fraction = start + (end - start) * 0.9
            message = line[:120]
            yield fraction, message
        code = proc.wait()
    finally:
        if proc.poll() is None:  # cancelled (the job was closed) or failed: stop pip
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.write("--- stopped by VoxFX\n")
    log.write(f"--- pip exited with {code}\n")
    if code != 0:
        raise InstallError(explain_failure(output, log_path, wheels_dir))
    yield end, message


def _forward_lines(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def explain_failure(output: list[str], log_path: Path, wheels_dir) -> str:
    """One line for the user from pip's output."""
    text = "\n".join(output)
    errors = [line for line in output if line.startswith("ERROR:")]
    last = errors[-1][len("ERROR:"):].strip() if errors else (output[-1] if output else "no output")
    if "No module named pip" in text:
        return (f"Blender's Python has no pip: run '{sys.executable} -m ensurepip' once, "
                "or install offline from a wheels folder made elsewhere")
    if not wheels_dir and any(sign in text for sign in OFFLINE_SIGNS):
        return (f"cannot reach PyPI (offline or behind a proxy): set 'Wheels Folder' to a folder with "
                f"the wheels and install again; log: {log_path}")
    if wheels_dir and "No matching distribution" in last:
        wanted = last.rsplit(" for ", 1)[-1]
        return (f"the wheels folder {wheels_dir} has no wheel of {wanted} for this Blender "
                f"(Python {sys.version_info[0]}.{sys.version_info[1]}, {sys.platform}); log: {log_path}")
    return f"pip failed: {last[:200]}; log: {log_path}"
