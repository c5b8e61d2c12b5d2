"""The README's walkthroughs name real controls: every bold term in the effect sections
(Voxelize, Snow, Liquid) is the label of a VoxFX panel, operator, property or enum item
of the registered add-on, and that control is drawn by one of the add-on's panels."""

import re

import bpy

from .helpers import ROOT, voxfx_registered

SECTIONS = ("## Voxelize", "## Snow", "## Liquid (FLIP)")


def readme_terms():
    """Bold terms of the effect sections, whitespace-normalized, with their section."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    parts = re.split(r"(?m)^(?=## )", text)
    terms = []
    for part in parts:
        head = part.splitlines()[0] if part else ""
        if head in SECTIONS:
            terms += [(head, " ".join(t.split())) for t in re.findall(r"\*\*([^*]+)\*\*", part)]
    return terms


def ui_controls():
    """label → set of names a panel must mention for it to be drawn ('' = a panel itself)."""
    found = {}

    def add(label, name):
        found.setdefault(label, set()).add(name)

    def walk(struct, seen):
        struct = getattr(struct, "bl_rna", struct)  # add-on property groups come as classes
        if struct.identifier in seen:
            return
        seen.add(struct.identifier)
        for p in struct.properties:
            if p.identifier == "rna_type":
                continue
            add(p.name, p.identifier)
            if p.type == "ENUM":
                for item in p.enum_items:
                    add(item.name, p.identifier)
            if p.type == "POINTER" and p.fixed_type.identifier.startswith(("Voxelize", "Snow", "Flip", "VoxFX")):
                walk(p.fixed_type, seen)

    walk(bpy.types.Scene.bl_rna.properties["voxfx"].fixed_type, set())
    walk(bpy.types.Object.bl_rna.properties["voxfx_flip"].fixed_type, set())
    for name in dir(bpy.types):
        cls = getattr(bpy.types, name)
        idname = getattr(cls, "bl_idname", None)
        if isinstance(idname, str) and idname.startswith("voxfx."):
            add(cls.bl_label, idname)
            module, op = idname.split(".")
            for p in getattr(getattr(bpy.ops, module), op).get_rna_type().properties:
                if p.type == "ENUM":  # an operator drawn once a choice (the Liquid panel's Timing buttons)
                    add(p.name, idname)
                    for item in p.enum_items:
                        add(item.name, idname)
        elif name.startswith("VOXFX_PT_"):
            add(cls.bl_label, "")
            add(getattr(cls, "bl_category", ""), "")
    return found


def test_walkthrough_controls_exist_and_are_drawn():
    terms = readme_terms()
    assert len(terms) > 40, "the effect sections lost their walkthroughs"
    panels_src = (ROOT / "addon" / "panels.py").read_text(encoding="utf-8")
    with voxfx_registered():
        controls = ui_controls()
    unknown = sorted({f"{sec}: {t}" for sec, t in terms if t not in controls})
    assert not unknown, f"README names controls the add-on does not have: {unknown}"
    undrawn = sorted({f"{sec}: {t}" for sec, t in terms
                      if not any(n == "" or f'"{n}"' in panels_src for n in controls[t])})
    assert not undrawn, f"README names controls no panel draws: {undrawn}"
