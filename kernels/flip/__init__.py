"""FLIP liquids (seed 003, Alg. 1–2) on a dense grid first: see ``grid.py`` for the
contract the stages share."""
