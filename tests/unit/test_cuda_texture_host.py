"""The CUDA texture sampler (texture.py's ``_SOURCE``) gives the NumPy reference's
colours, run on the host: nvcc builds the per-voxel function into a small host program
fed random triangles, UVs far outside [0, 1] and several images. Also the whole source
(the kernel included) compiles for Turing and Hopper. The GPU comparison is
tests/gpu/test_texture_gpu.py."""

import shutil
import subprocess

import numpy as np
import pytest

from voxfx.kernels.voxelize import texture

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

HARNESS = r"""
#include <cmath>
#include <cstdio>
#include <vector>
#define VOXFX_HOST_ONLY
#include "texture_source.cuh"
template <typename T> std::vector<T> load(const char* name, long long count) {
    std::vector<T> v(count > 0 ? count : 1);
    FILE* f = fopen(name, "rb");
    if (count > 0 && fread(v.data(), sizeof(T), count, f) != (size_t)count) { perror(name); }
    fclose(f);
    return v;
}
int main(int argc, char** argv) {
    long long n, t, m, p, v;
    if (sscanf(argv[1], "%lld", &n) != 1 || sscanf(argv[2], "%lld", &t) != 1 ||
        sscanf(argv[3], "%lld", &m) != 1 || sscanf(argv[4], "%lld", &p) != 1 ||
        sscanf(argv[5], "%lld", &v) != 1) return 1;
    auto centres = load<float>("centres.bin", 3 * n);
    auto owner = load<int>("owner.bin", n);
    auto corners = load<float>("corners.bin", 9 * t);
    auto triangles = load<int>("triangles.bin", 3 * t);
    auto ring_start = load<long long>("ring_start.bin", v + 1);
    auto ring = load<int>("ring.bin", 3 * t);
    auto uvs = load<float>("uvs.bin", 6 * t);
    auto image = load<int>("image.bin", t);
    auto start = load<long long>("start.bin", m);
    auto width = load<int>("width.bin", m);
    auto height = load<int>("height.bin", m);
    auto samplers = load<int>("samplers.bin", m);
    auto pixels = load<float>("pixels.bin", p);
    std::vector<float> out(4 * n);
    std::vector<unsigned char> textured(n);
    for (long long i = 0; i < n; ++i)
        textured[i] = texture_color_of(i, centres.data(), owner.data(), corners.data(), triangles.data(),
                                       ring_start.data(), ring.data(), uvs.data(), image.data(),
                                       start.data(), width.data(), height.data(), samplers.data(), pixels.data(),
                                       out.data());
    FILE* f = fopen("out.bin", "wb");
    fwrite(out.data(), sizeof(float), 4 * n, f);
    fwrite(textured.data(), 1, n, f);
    fclose(f);
    return 0;
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    folder = tmp_path_factory.mktemp("texture")
    (folder / "texture_source.cuh").write_text(texture._SOURCE)
    (folder / "harness.cu").write_text(HARNESS)
    r = subprocess.run(["nvcc", "--std=c++17", "-O2", "-o", str(folder / "harness"), str(folder / "harness.cu")],
                       capture_output=True, text=True, timeout=300, cwd=folder)
    assert r.returncode == 0, r.stderr
    return folder


def run(folder, centres, owner, vertices, triangles, uvs, image_of_triangle, images, samplers):
    start, width, height, pixels = texture.pack_images(images)
    ring_start, ring = texture.triangle_rings(triangles, len(vertices))
    arrays = {"centres": centres.astype(np.float32), "owner": owner.astype(np.int32),
              "corners": vertices[triangles].astype(np.float32), "triangles": triangles.astype(np.int32),
              "ring_start": ring_start, "ring": ring, "uvs": uvs.astype(np.float32),
              "image": image_of_triangle.astype(np.int32), "start": start, "width": width, "height": height,
              "samplers": np.asarray(samplers, np.int32), "pixels": pixels}
    for name, a in arrays.items():
        (folder / f"{name}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
    n = len(owner)
    subprocess.run([str(folder / "harness"), str(n), str(len(image_of_triangle)), str(len(width)), str(len(pixels)),
                    str(len(vertices))], check=True, cwd=folder, timeout=60)
    data = (folder / "out.bin").read_bytes()
    out = np.frombuffer(data[: 16 * n], np.float32).reshape(n, 4)
    return out, np.frombuffer(data[16 * n:], np.uint8).astype(bool)


@pytest.mark.parametrize("seed", range(8))
def test_host_build_of_the_cuda_sampler_matches_numpy(harness, seed):
    """Every interpolation × extension (seed 0..7 is the sampler code of the middle
    image; the others are random), UVs far outside [0, 1]."""
    rng = np.random.default_rng(seed)
    t, n, v = 50, 4000, 30
    vertices = rng.normal(size=(v, 3)).astype(np.float32)
    triangles = np.stack([rng.choice(v, 3, replace=False) for _ in range(t)]).astype(np.int32)
    triangles[:3] = triangles[:3, :1]  # some degenerate triangles (one vertex thrice)
    uvs = rng.uniform(-3, 4, size=(t, 3, 2)).astype(np.float32)
    images = [rng.random((h, w, 4)).astype(np.float32) for h, w in ((1, 1), (3, 5), (16, 9))]
    image_of_triangle = rng.integers(-1, len(images), size=t)
    image_of_triangle[rng.random(t) < 0.5] = 1  # many neighbours share an image
    owner = rng.integers(-1, t, size=n)
    centres = (rng.normal(size=(n, 3)) * 2).astype(np.float32)
    samplers = [int(rng.integers(8)), seed, int(rng.integers(8))]
    host, host_textured = run(harness, centres, owner, vertices, triangles, uvs, image_of_triangle, images, samplers)
    ref, ref_textured = texture.texture_colors(centres, owner, vertices, triangles, uvs, image_of_triangle, images,
                                               xp=np, samplers=samplers)
    np.testing.assert_array_equal(host_textured, ref_textured)
    assert host_textured.any() and (~host_textured).any()
    np.testing.assert_array_equal(host[ref_textured], ref[ref_textured])  # same float32 operations
    assert np.isnan(host[~ref_textured]).all()


@pytest.mark.parametrize("arch", ["sm_75", "sm_90"])
def test_texture_kernel_compiles(tmp_path, arch):
    source = tmp_path / "texture.cu"
    source.write_text(texture._SOURCE)
    r = subprocess.run(["nvcc", "-ptx", f"-arch={arch}", *texture._OPTIONS, "-Werror", "all-warnings", str(source),
                        "-o", str(tmp_path / "texture.ptx")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
