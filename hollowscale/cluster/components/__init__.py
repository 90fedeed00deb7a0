"""Each component's command line, one pure function per component (KWOK's ``pkg/kwokctl/components``).

A module per component: a small frozen settings object (binary, ports, files, the profile's and the
features' flags) and ``argv(settings) -> list[str]``.  Nothing here starts, writes or asks anything:
:class:`hollowscale.cluster.local.LocalCluster` and :mod:`hollowscale.cluster.realnode.pool` gather the
settings (ports picked, certificates written, gates negotiated) and launch what these return.  The
exact command lines are golden-tested (``tests/unit/test_components_golden.py`` against
``tests/fixtures/components/``), so a changed flag shows up as a diff of a readable file.

- :mod:`.etcd`, :mod:`.apiserver`, :mod:`.controller_manager`, :mod:`.scheduler` (the control plane;
  :mod:`.shared` holds the settings and flags the last two share);
- :mod:`.kueue` (Kueue, run in a private mount namespace);
- :mod:`.containerd`, :mod:`.kubelet`, :mod:`.deviceplugin`, :mod:`.draplugin` (a real node's processes).
"""
