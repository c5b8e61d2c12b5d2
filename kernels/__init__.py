"""VoxFX kernels: array in, array out, NumPy (CPU reference) or CuPy (GPU).

Nothing here imports ``bpy``; every public function takes and returns arrays in world
metres and is usable from plain Python::

    from voxfx.kernels import backend
    print(backend.device_info())
"""
