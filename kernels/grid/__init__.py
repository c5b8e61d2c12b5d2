"""The grid core: where every effect keeps its voxels and the operations on them.

* ``spec.py``       ``GridSpec``: origin, voxel size, shape; world ↔ voxel index.
* ``dense.py``      ``MacGrid``: the dense staggered grid FLIP and the wind hold (faces,
                    new face/cell arrays, index, world → cell units), and how a brick grid
                    stands behind the same interface.
* ``mac.py``        the staggered layout's operations: face shapes, cell types, faces
                    touching a mask (solid faces, walls), face sum (divergence), 7-point
                    neighbour sum and count, red-black colours, gradient subtraction and the
                    one projection of a cell-typed grid (``fixed_faces``, ``project``; FLIP
                    and the wind). Device twin: ``cuda/include/voxfx_mac.cuh``
                    (``cell_face_sum``, ``project_face``).
* ``sample.py``     the one trilinear sampler of lattices and faces (with gradient).
                    Device twin: ``cuda/include/voxfx_lattice.cuh``.
* ``components.py`` 6-connected components: lowest-index labels, reachability.
* ``launch.py``     kernel launches (``Kernels``: a .cu file, its options and -D constants)
                    and CUDA-graph capture of launch sequences (``GraphLoop``).
* ``bitgrid.py``    packed bit grids; ``sparse.py`` / ``sparse_ops.py`` the sparse brick core.

Constants that Python and CUDA share are defined once, in Python, and reach the kernels as
-D compile options (``Kernels(defines=...)``; the cell types are ``mac.CELL_TYPES``;
``launch.Double`` for the doubles of the voxelizer). The warp and block reductions of
every kernel are ``cuda/include/voxfx_reduce.cuh``.
"""

from .spec import GridSpec  # noqa: F401
