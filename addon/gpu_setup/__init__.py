"""GPU support set up from inside Blender, without ``bpy`` (unit-testable): find the
NVIDIA driver (``driver``), choose the CuPy wheel for it and for Blender's numpy
(``plan``), install it with pip into a folder VoxFX owns and make it importable
(``folder``, ``install``), and say what is there and what is missing (``check``).

``addon/operators/gpu.py`` puts this behind *Preferences → Add-ons → VoxFX*.
"""
