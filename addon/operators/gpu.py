"""GPU support from inside Blender: Check GPU, Install GPU Support, Remove GPU Support.

The work is in ``addon/gpu_setup`` (no bpy); these operators orchestrate and report,
and ``register`` points CuPy's kernel cache and the import path at VoxFX's folders in
Blender's user data.
"""

import sys
from pathlib import Path

import bpy

from ...kernels import backend
from ...kernels.errors import VoxFXError
from .. import addon_package
from ..gpu_setup import check as gpu_check
from ..gpu_setup import driver as gpu_driver
from ..gpu_setup import folder as gpu_folder
from ..gpu_setup.install import install_steps
from ..gpu_setup.plan import plan_install
from ..jobs import FINISHED, JobOperator

_findings = ["GPU not checked yet: press Check GPU"]


def last_findings() -> list:
    """The last Check GPU, for the preferences (drawing must not probe)."""
    return list(_findings)


def user_data_dir(name: str) -> Path:
    """A folder of VoxFX's in Blender's user data (kept when the extension is updated)."""
    try:
        return Path(bpy.utils.extension_path_user(addon_package(), path=name, create=False))
    except ValueError:  # not installed as an extension (run from a checkout): user datafiles
        return Path(bpy.utils.user_resource("DATAFILES", path=f"voxfx/{name}"))


def gpu_folder_path() -> Path:
    return gpu_folder.gpu_folder(user_data_dir("gpu"))


def bundled_site_packages() -> Path:
    """Where Blender puts the wheels of an extension zip built with them inside
    (tools/bundle_gpu_wheels.py): the extensions' own site-packages."""
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return Path(bpy.utils.user_resource("EXTENSIONS")) / ".local" / "lib" / version / "site-packages"


def _wheels_dir_default() -> str:
    from ..preferences import preferences

    prefs = preferences()
    return bpy.path.abspath(prefs.gpu_wheels_dir) if prefs is not None and prefs.gpu_wheels_dir else ""


def use_installed_gpu_support() -> str:
    """After an install: make it importable, re-probe, and say what happens next."""
    problems = gpu_folder.activate(gpu_folder_path())
    if gpu_folder.cupy_loaded():
        return "GPU support installed: restart Blender to use it (CuPy was already loaded)"
    backend.reset()
    cp, why_not = backend.probe_cuda()
    if cp is not None:
        return f"GPU support installed: VoxFX now computes on {backend.get_backend(refresh=True).device_info().name}"
    extra = f" (library problems: {'; '.join(problems)})" if problems else ""
    return f"GPU support installed, but the GPU is not usable yet: {why_not}{extra}"


class VOXFX_OT_gpu_check(bpy.types.Operator):
    """Look for the NVIDIA driver, Blender's numpy and CuPy, and say what is missing"""

    bl_idname = "voxfx.gpu_check"
    bl_label = "Check GPU"
    bl_options = {"REGISTER"}

    def execute(self, context):
        global _findings
        folder = gpu_folder_path()
        gpu_folder.activate(folder)
        found = gpu_check.check(folder)
        _findings = found.lines + [found.summary]
        for line in found.lines:
            self.report({"INFO"}, line)
        self.report({"INFO"} if found.gpu_ready else {"WARNING"}, found.summary)
        return {"FINISHED"}


class VOXFX_OT_gpu_install(JobOperator, bpy.types.Operator):
    """Install the CuPy that fits this NVIDIA driver and Blender's numpy into VoxFX's own folder (from PyPI, or from the Wheels Folder when one is set)"""  # noqa: E501 (Blender shows it as one tooltip)

    bl_idname = "voxfx.gpu_install"
    bl_label = "Install GPU Support"
    bl_options = {"REGISTER"}
    job_title = "VoxFX GPU support"

    wheels_dir: bpy.props.StringProperty(
        name="Wheels Folder", subtype="DIR_PATH", options={"SKIP_SAVE"},
        description="Install offline from the wheels in this folder instead of PyPI (empty: the Wheels Folder "
                    "of the preferences)")
    requirement: bpy.props.StringProperty(
        name="Package", options={"HIDDEN", "SKIP_SAVE"},
        description="Install this pip requirement instead of the CuPy chosen for the driver (pipelines and tests); "
                    "no driver check")

    def make_job(self, context):
        if self.requirement:
            requirements = [self.requirement]
        else:
            found = gpu_driver.detect()
            if not found.found:
                raise VoxFXError(f"no NVIDIA driver found ({found.problem}): install the NVIDIA driver first; "
                                 "VoxFX runs on the CPU meanwhile")
            import numpy as np

            requirements = list(plan_install(found.cuda, np.__version__).requirements)
        wheels = bpy.path.abspath(self.wheels_dir) if self.wheels_dir else _wheels_dir_default()
        return install_steps(gpu_folder_path(), requirements, wheels_dir=wheels or None)

    def _conclude(self, context, runner):
        if runner.state != FINISHED:
            return super()._conclude(context, runner)
        if not runner.result:
            self.report({"INFO"}, "Nothing to install: Blender's Python already has it")
        else:
            self.report({"INFO"}, f"Installed {', '.join(runner.result)}")
        self.report({"INFO"}, use_installed_gpu_support())
        return {"FINISHED"}


class VOXFX_OT_gpu_remove(bpy.types.Operator):
    """Delete VoxFX's GPU support folder (the CuPy that Install GPU Support put there)"""

    bl_idname = "voxfx.gpu_remove"
    bl_label = "Remove GPU Support"
    bl_options = {"REGISTER"}

    def execute(self, context):
        folder = gpu_folder_path()
        if not folder.exists():
            self.report({"INFO"}, f"No GPU support folder to remove ({folder})")
            return {"CANCELLED"}
        try:
            gpu_folder.remove(folder)
        except VoxFXError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        if gpu_folder.cupy_loaded():
            self.report({"INFO"}, f"Removed {folder}; restart Blender to unload CuPy")
        else:
            backend.reset()
            self.report({"INFO"}, f"Removed {folder}")
        return {"FINISHED"}


_classes = (VOXFX_OT_gpu_check, VOXFX_OT_gpu_install, VOXFX_OT_gpu_remove)
_register, _unregister = bpy.utils.register_classes_factory(_classes)


def register():
    _register()
    # Before anything imports CuPy: its kernel cache and the installed GPU support.
    backend.set_kernel_cache(user_data_dir("kernel_cache"))
    gpu_folder.activate(gpu_folder_path())
    gpu_folder.preload_cuda_libraries(bundled_site_packages())  # NVIDIA libraries from a bundled zip


def unregister():
    gpu_folder.deactivate(gpu_folder_path())
    _unregister()
