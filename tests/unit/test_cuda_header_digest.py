"""CuPy keys its kernel cache on the compiled text, not on the headers that text includes:
the shared headers' digest is part of every module's text, so changing a header (an update
of VoxFX) can never load a binary built from the old one."""

from kernels import backend


def _write(folder, name, text):
    (folder / name).write_text(text, encoding="utf-8")


def test_digest_follows_every_header_byte_name_and_count(tmp_path):
    _write(tmp_path, "a.cuh", "__device__ int f() { return 1; }\n")
    _write(tmp_path, "b.cuh", "__device__ int g() { return 2; }\n")
    first = backend.headers_digest(tmp_path)
    assert backend.headers_digest(tmp_path) == first  # stable

    _write(tmp_path, "a.cuh", "__device__ int f() { return 3; }\n")
    changed = backend.headers_digest(tmp_path)
    assert changed != first

    (tmp_path / "b.cuh").rename(tmp_path / "c.cuh")
    renamed = backend.headers_digest(tmp_path)
    assert renamed not in (first, changed)

    _write(tmp_path, "d.cuh", "")
    added = backend.headers_digest(tmp_path)
    assert added not in (first, changed, renamed)

    _write(tmp_path, "notes.txt", "not a header")  # only *.cuh count
    assert backend.headers_digest(tmp_path) == added


def test_every_module_text_carries_the_shared_headers_digest():
    sources = sorted(p.name for p in backend.CUDA_DIR.glob("*.cu"))
    assert sources
    digest = backend.headers_digest()
    for name in sources:
        text = backend.cuda_source(name)
        assert text.startswith((backend.CUDA_DIR / name).read_text(encoding="utf-8"))
        assert text.rstrip().endswith(f"// voxfx headers {digest}")


def test_kernel_files_include_only_shared_headers():
    """The digest covers include/*.cuh alone: a kernel file that #included another .cu
    (outside the digest) could load a binary built from that file's old text. Shared device
    code therefore lives in the headers (the voxelizer's: include/voxfx_voxelize.cuh)."""
    import re

    sources = sorted(backend.CUDA_DIR.glob("*.cu")) + sorted(backend.CUDA_INCLUDE.glob("*.cuh"))
    included = {}
    for path in sources:
        for name in re.findall(r'^\s*#\s*include\s*"([^"]+)"', path.read_text(encoding="utf-8"), re.M):
            included.setdefault(name, []).append(path.name)
    assert "voxfx_search.cuh" in included  # the pattern finds the includes
    outside = {name: users for name, users in included.items() if not (backend.CUDA_INCLUDE / name).is_file()}
    assert outside == {}
