"""The one TLS client context builder (kubeconfig endpoints, cluster health checks, Locust users).

``module`` lets a gevent program build its context from ``gevent.ssl`` (Locust's FastHttpUser needs
that); everything else uses the standard :mod:`ssl`.
"""

from __future__ import annotations

import ssl
from types import ModuleType
from typing import Any


def client_ssl_context(ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None,
                       insecure: bool = False, module: ModuleType = ssl) -> Any:
    """A client context that verifies the server with ``ca_file`` (system store when None) and presents
    ``cert_file``/``key_file`` when both are given; ``insecure`` skips server verification."""
    ctx = module.create_default_context(cafile=ca_file)
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = module.CERT_NONE
    if cert_file and key_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx
