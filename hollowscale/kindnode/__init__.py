"""A kind node image built here from our own binaries, and the container engine kind nodes run in (issue 26).

No registry is reachable, so nothing of kind's own images is used: the Debian tree comes from
debootstrap (:mod:`~hollowscale.kindnode.rootfs`), kind's files from its Go module with the changes this
machine kind needs (:mod:`~hollowscale.kindnode.files`), the images kubeadm runs from our builds
(:mod:`~hollowscale.kindnode.image`), and the engine is Debian's podman unpacked into the cache
(:mod:`~hollowscale.kindnode.engine`).
"""
