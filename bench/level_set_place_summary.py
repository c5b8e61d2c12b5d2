"""Short lines from ``bench/flip_sparse.py --frames`` logs for the level set's binning ways
(``VOXFX_LEVEL_SET_PLACE``, kernels/flip/surface_place.py; ``bench/level_set_place_call.sh``), so
that a device call's few returned characters hold them.

    python bench/level_set_place_summary.py frames LOG...   # --stages runs: a line a frame
    python bench/level_set_place_summary.py modes LOG       # --level-set-modes: a line a way a frame
    python bench/level_set_place_summary.py pick LOG        # the way of the modes log with the least
                                                            # binning time over frames 6-11 (not lean)

"frames": frame, step ms, level set ms, the user frame ms (the table's last column) and the level
set's device ms by stage (the binning's stages: set-up, count, scan + read, interior cells, place,
order cells; then gather and the sum). "modes": each way's device ms and those stages, the
points and fullest cell, and the φ comparison line. The binning time is the sum of those six
stages."""

from __future__ import annotations

import re
import sys

BINNING = ("set-up", "count", "scan + read", "interior cells", "place", "order cells")
SHORT = {"set-up": "setup", "count": "count", "scan + read": "scan", "interior cells": "inter", "place": "place",
         "order cells": "order", "gather": "gather"}


def stage_values(text: str) -> dict:
    """{stage: value} from "name v, name v, ..." (names may hold spaces; a trailing "(sum …)" dropped)."""
    text = re.sub(r"\s*\(sum [^)]*\)\s*$", "", text.strip())
    out = {}
    for part in text.split(", "):
        name, _, value = part.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            continue
    return out


def binning_text(stages: dict) -> str:
    parts = [f"{SHORT[k]} {stages[k]:.2f}" for k in (*BINNING, "gather") if k in stages]
    total = sum(stages.get(k, 0.0) for k in BINNING)
    return " ".join(parts) + f" | binning {total:.2f}"


def frames(paths) -> None:
    for path in paths:
        print(f"== {path}")
        row = None
        for line in open(path, errors="replace"):
            cells = [c.strip() for c in line.split("|")]
            if len(cells) >= 10 and cells[0].isdigit():
                if row:
                    print(row)
                row = f"{cells[0]}: step {cells[2]} ls {cells[4].split(' ')[0]} user {cells[-1]}"
            elif "level set device ms:" in line and row is not None:
                row += "  " + binning_text(stage_values(line.split("level set device ms:", 1)[1]))
        if row:
            print(row)


def modes(path, pick=False):
    """Per frame, each way's device ms and binning stages; with *pick*, the way (other than the
    first) of least binning time over frames 6-11, printed alone."""
    frame, sums = None, {}
    for line in open(path, errors="replace"):
        cells = [c.strip() for c in line.split("|")]
        if len(cells) >= 10 and cells[0].isdigit():
            frame = int(cells[0])
            if not pick:
                print(f"frame {frame}: step {cells[2]}")
            continue
        m = re.match(r"^ {3}(\S+): device ([\d.]+) ms, [^;]*; (.*)$", line.rstrip("\n"))
        if m and frame is not None:
            way, device, rest = m.group(1), float(m.group(2)), m.group(3)
            stages = stage_values(rest)
            if frame >= 6:
                sums[way] = sums.get(way, 0.0) + sum(stages.get(k, 0.0) for k in BINNING)
            if not pick:
                extra = " ".join(f"{k.strip('[]')} {stages[k]:.0f}" for k in ("[points]", "[fullest]") if k in stages)
                print(f"  {way.split('=')[-1]}: device {device:.2f} | {binning_text(stages)} | {extra}")
        elif not pick and line.startswith("   φ against"):
            print("  " + line.strip()[:150])
    if pick:
        ways = [w for w in sums if "=" in w]
        print(min(ways, key=sums.get).split("=")[-1] if ways else "tags")
    else:
        print("binning sums over frames 6-11: " + ", ".join(f"{w.split('=')[-1]} {v:.2f}" for w, v in sums.items()))


if __name__ == "__main__":
    what, *logs = sys.argv[1:]
    if what == "frames":
        frames(logs)
    else:
        modes(logs[0], pick=what == "pick")
