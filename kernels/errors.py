"""Errors a user may see. Their text is the message: it names the object, setting or
file at fault and what to do, so operators can show it verbatim (never a traceback)."""


class VoxFXError(Exception):
    """Base class of every error VoxFX reports to the user."""


class InputError(VoxFXError, ValueError):
    """Bad input: NaN vertices, empty selection, non-positive voxel size, ..."""


class BadGeometryError(InputError):
    """An object's geometry cannot be used (NaN/inf vertices, indices out of range): the
    operation stops naming it, rather than leave it out silently."""


class Cancelled(VoxFXError):
    """The user (or a progress callback returning False) cancelled the work."""
