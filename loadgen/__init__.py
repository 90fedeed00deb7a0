"""Locust load generation for hollowscale (runnable alone: ``locust -f loadgen/locustfile.py``).

Layering: imports nothing of the project except the leaf :mod:`hollowscale.kube`.
"""
