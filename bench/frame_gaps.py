"""Sums of ``bench/flip_sparse.py --frames N --stages`` logs (helper h18d): per log, each frame's
user ms (trim + step + level set) and the device between the stages (``_frame_stages``: the device
idle or running kernels no stage wraps), then over frames A–B (6–11 unless given) the user ms, the
device between the stages by the stage that follows, the host outside the stages and the stages'
device ms, with their sum and the between's (the step's device span: comparable where a way moves
work out of the wrapped stages, e.g. ``VOXFX_SPARSE_P2G_TAIL=tail``'s kernel).

    python3 bench/frame_gaps.py LOG [LOG ...] [--frames 6-11]
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict

ROW = re.compile(r"^(\d+) \|")
BETWEEN = re.compile(r"device between stages ([\d.]+) ms \(before: ([^)]*)\)")
STAGES = re.compile(r"step stages host/device ms \(sums over the substeps\): (.*); outside them ([-\d.]+);")


def read(path):
    """[(frame, user ms, between ms, {stage: between ms}, outside ms, {stage: device ms})]."""
    frames, cur = [], None
    for line in open(path, errors="replace"):
        m = ROW.match(line)
        if m:
            cells = [c.strip() for c in line.split("|")]
            cur = {"frame": int(m.group(1)), "user": float(cells[9]) if cells[9] not in ("", "-") else None,
                   "between": None, "before": {}, "outside": None, "device": {}}
            frames.append(cur)
            continue
        if cur is None:
            continue
        m = STAGES.search(line)
        if m:
            cur["outside"] = float(m.group(2))
            for part in m.group(1).split(", "):
                name, _, times = re.sub(r" \[.*?\]", "", part).rpartition(" ")
                if "/" in times:
                    cur["device"][name] = float(times.split("/")[1])
        m = BETWEEN.search(line)
        if m:
            cur["between"] = float(m.group(1))
            for part in m.group(2).split(", "):
                name, _, ms = part.rpartition(" ")
                cur["before"][name] = float(ms)
    return frames


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--frames", default="6-11")
    args = ap.parse_args()
    lo, _, hi = args.frames.partition("-")
    span = range(int(lo), int(hi or lo) + 1)
    for path in args.logs:
        frames = read(path)
        print(f"{path}: frame:user/between " + " ".join(
            f"{f['frame']}:{f['user']:.0f}/{f['between']:.2f}" for f in frames
            if f["user"] is not None and f["between"] is not None))
        sel = [f for f in frames if f["frame"] in span and f["between"] is not None]
        if not sel:
            continue
        before, device = defaultdict(float), defaultdict(float)
        for f in sel:
            for k, v in f["before"].items():
                before[k] += v
            for k, v in f["device"].items():
                device[k] += v
        print(f"   frames {args.frames} ({len(sel)}): user {sum(f['user'] or 0 for f in sel):.0f} ms, device between "
              f"{sum(f['between'] for f in sel):.2f} (before: " + ", ".join(f"{k} {v:.2f}" for k, v in before.items())
              + f"), outside {sum(f['outside'] or 0 for f in sel):.2f}; stages' device {sum(device.values()):.2f} + "
              f"between = {sum(device.values()) + sum(f['between'] for f in sel):.2f}: "
              + ", ".join(f"{k} {v:.2f}" for k, v in device.items()))


if __name__ == "__main__":
    main()
