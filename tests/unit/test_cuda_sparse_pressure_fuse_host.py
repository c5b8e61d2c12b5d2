"""The coarse levels' joined launches (sparse_pressure_workspace_levels.FUSE "1":
mgb_coarsen_span, mgb_restrict_span, mgs_level_end) against the separate launches they
replace, on the host without a GPU: the brick set-up driver of
test_cuda_sparse_pressure_bricks_host (with the restriction by scatter, as the workspace
launches it) rewritten to launch the joined kernels where sparse_pressure_workspace_levels
does — their blocks in reverse order, and each span on `wide` blocks of a larger grid — must
print the same tables, sizes and unknown spans as the separate launches, and VCycle's tables.
A kernel without the next level's coarsen must fail it. The device run:
tests/gpu/test_flip_sparse_pressure_fuse_gpu.py."""

import re

import pytest

from tests.unit.test_cuda_exact import _build, with_defines
from tests.unit.test_cuda_sparse_pressure_bricks_host import BRICKS, level0_lines, scene
from tests.unit.test_cuda_sparse_pressure_setup_host import assert_levels, scatter_driver
from voxfx.kernels.flip import sparse_multigrid, sparse_pressure
from voxfx.kernels.flip.sparse_multigrid import VCycle

# Both drivers print every level's sizes and spans after the kept tables.
_SPANS = ("    print_kept(min_side, count, cnt, span, built);\n",
          "    print_kept(min_side, count, cnt, span, built);\n    printf(\"spans\\n\");\n"
          "    for (int v : cnt) printf(\"%d\\n\", v);\n    for (int v : span) printf(\"%d\\n\", v);\n")

# The blocks of a joined launch in reverse order: no part may rely on an earlier block's writes.
_DOWN = r"""
#define ONE_PER_ITEM_DOWN(n, call) do { h_dim.x = 1; h_thread.x = 0; h_grid.x = (unsigned)(n); \
    for (unsigned blk = (unsigned)(n); blk-- > 0;) { h_block.x = blk; call; } } while (0)
"""

_SWAPS = (  # (a launch's pattern, up to its ");"), its replacement: sparse_pressure_workspace_levels' joined launches
    (r"    ONE_PER_ITEM\(m0, mgb_unknown_span\(.*?\)\);\n", ""),
    (r"ONE_PER_ITEM\(cand, mgb_coarsen\(.*?\)\);",
     "ONE_PER_ITEM_DOWN(std::max(cand, WIDE), mgb_coarsen_span(kind.data(), active, cand, flag.data(), take.data(), "
     "map1.data(), cells0.data(), &cnt[0], coords.data(), &span[0], WIDE));"),
    (r"ONE_PER_ITEM\(nb1 \+ 1, mgb_restrict\(.*?\)\);\s*ONE_PER_ITEM\(nb1, mgs_key_span\(.*?\)\);",
     "ONE_PER_ITEM_DOWN(std::max(nb1 + 1, WIDE), mgb_restrict_span(scand.data(), uorder.data(), &cnt[4], nb1 + 1, "
     "nbr27.data(), position0.data(), &cnt[0], B1.down.data(), ukeys.data(), &span[6], WIDE));"),
    (r"    std::vector<TailLevel> T\(count\);\n",
     "    std::vector<TailLevel> T(count);\n"
     "    std::vector<unsigned char> nflag;  // the next level's coarsen, written by this level's mgs_level_end\n"
     "    std::vector<int> ntake;\n    bool coarsened = false;\n"),
    (r"std::vector<unsigned char> cflag\(fb\);\s*std::vector<int> ctake\(fb\), cscan;\s*"
     r"ONE_PER_ITEM\(fb, mgs_coarsen\(.*?\)\);",
     "std::vector<unsigned char> cflag(fb, 9);\n        std::vector<int> ctake(fb, -7), cscan;\n"
     "        if (coarsened) { cflag = nflag; ctake = ntake; }\n"
     "        else ONE_PER_ITEM(fb, mgs_coarsen(f.keys.data(), f.fluid.data(), fc, fb, f.bx, f.by, f.bz, cflag.data(), "
     "ctake.data()));"),
    (r"ONE_PER_ITEM\(stride, mgs_prolong_restrict\(.*?\)\);\s*ONE_PER_ITEM\(nb, mgs_key_span\(.*?\)\);",
     "const bool ahead = l + 1 < count && !(tail > 0 && l + 1 >= tail);  // the next level launched too\n"
     "        const int nbound = ahead ? nb : 0;\n"
     "        nflag.assign(std::max(nbound, 1), 9); ntake.assign(std::max(nbound, 1), -7);\n"
     "        ONE_PER_ITEM_DOWN(std::max(std::max(stride, nb), WIDE), mgs_level_end(ukeys.data(), fc, stride, f.bx, "
     "f.by, f.bz, c.keys.data(), cc, c.position.data(), c.bx, c.by, c.bz, B.up.data(), nb + 1, B.down.data(), "
     "cukeys.data(), &span[6 * l], WIDE, c.fluid.data(), nbound, nflag.data(), ntake.data()));\n"
     "        coarsened = ahead;"),
)


def separate_driver():
    """BRICKS with the restriction by scatter, the sizes and spans printed."""
    text = scatter_driver(BRICKS)
    assert text.count(_SPANS[0]) == 1
    return text.replace(*_SPANS)


def fused_driver(wide):
    """separate_driver's launches joined as FUSE "1" launches them, each span on *wide*
    blocks."""
    text = separate_driver()
    assert text.count("struct Set {") == 1
    text = text.replace("struct Set {", _DOWN + f"#define WIDE {int(wide)}\nstruct Set {{")
    for pattern, new in _SWAPS:
        text, count = re.subn(pattern, lambda _, new=new: new, text, flags=re.S)
        assert count == 1, pattern
    return text


def _kernels():
    from voxfx.kernels.flip.sparse_pressure_setup import _B

    return _B


@pytest.fixture(scope="module")
def separate(tmp_path_factory):
    return _build(tmp_path_factory, with_defines(separate_driver(), _kernels()))


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    return {wide: _build(tmp_path_factory, with_defines(fused_driver(wide), _kernels())) for wide in (1, 3)}


# Mutants: mgs_level_end without the next level's coarsen (its flag and take stay unwritten),
# mgb_restrict_span without level 1's span.
_MUTANTS = {"next": ("flip_sparse_pressure_setup.cu",
                     "    mgs_coarsen_body(ckeys, cfluid, ccnt, nbound, cbx, cby, cbz, nflag, ntake);\n"),
            "span": ("flip_sparse_pressure_bricks.cu", "    widen_span_blocks(ukeys, ccnt[2], wide, span);\n")}


@pytest.fixture(scope="module", params=sorted(_MUTANTS))
def mutant(request, tmp_path_factory):
    from voxfx.kernels import backend

    name, line = _MUTANTS[request.param]
    text = (backend.CUDA_DIR / name).read_text()
    assert text.count(line) == 1
    d = tmp_path_factory.mktemp("fuse_mutant")
    (d / name).write_text(text.replace(line, ""))
    source = fused_driver(3).replace(f'#include "{name}"', f'#include "{d / name}"')
    assert source.count(str(d / name)) == 1
    return request.param, _build(tmp_path_factory, with_defines(source, _kernels()))


def _lines(name, tail, ranked=True):
    g = scene(name)
    kind, _, _ = sparse_pressure.solver_cells(g)
    level = sparse_pressure.Unknowns(g, kind)
    lines = [f"{sparse_multigrid.MG_MIN_SIDE} {sparse_multigrid.MAX_LEVELS} {sparse_multigrid._MARGIN} {tail}",
             *level0_lines(g, kind, level), f"{int(ranked)} {g.topology.count}",
             *map(str, g.topology.keys), *map(str, g.topology.slots)]
    return lines, VCycle(g, kind, level)


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("ranked", [True, False])
@pytest.mark.parametrize("tail", [0, 3, 4])
@pytest.mark.parametrize("name", ["tank", "sealed", "sheet", "puddle", "moved"])
def test_joined_launches_give_the_separate_launches_tables_sizes_and_spans(separate, fused, name, tail, ranked):
    """Every kept level's tables, every level's cnt and span: the joined launches (spans on 1
    and on 3 blocks, blocks in reverse order) print what the separate launches print, and the
    tables are VCycle's."""
    lines, M = _lines(name, tail, ranked)
    want = separate.raw(lines, check=True)
    tables, spans = want.split("spans\n")
    assert_levels(tables.split(), M)
    assert len(spans.split()) % 10 == 0 and len(spans.split()) >= 10
    for wide, run in fused.items():
        assert run.raw(lines, check=True) == want, wide


@pytest.mark.usefixtures("mg_dense_sweeps")
@pytest.mark.parametrize("name", ["tank", "sealed"])
def test_joined_launches_mutants_fail(separate, mutant, name):
    """mgs_level_end without the next level's mgs_coarsen (tail from level 4: level 2's launch
    coarsens level 3; its poisoned flags make the driver fail or print other sizes), or
    mgb_restrict_span without level 1's span (other spans): not the separate launches' output."""
    which, run = mutant
    lines, _ = _lines(name, 4)
    want = separate.raw(lines, check=True)
    got = run.raw(lines)
    assert got != want
    if which == "span":  # runs through: the tables may agree, the spans do not
        assert got.split("spans\n")[1] != want.split("spans\n")[1]
