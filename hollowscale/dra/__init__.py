"""GPUs as DRA devices in a run: the DeviceClasses it creates and deletes, the claims' dry run before the
load, the claim timeline, its figures and its part of the report (see :mod:`hollowscale.dra.feature`).

The names and the rendering of devices are defined once in :mod:`hollow.dra` (the hollow agent
publishes the slices) and re-exported here as :mod:`hollowscale.dra.devices`.
"""
