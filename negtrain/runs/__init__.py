"""What reads finished run directories: runs, reports, seed groups, sweeps and running one here."""

from negtrain import package_getattr

# Old imports of negtrain.runs (once a module, now negtrain.runs.reading) keep working.
__getattr__ = package_getattr(__name__, "negtrain.runs.reading")
