"""Snowfall with accumulation (seed 002 §2.4, §3.3): flakes in a wind field that pile up
on terrain and objects. See ``domain.py`` for the shared state layout."""
