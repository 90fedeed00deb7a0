"""Training jobs through failures: what faults cost a gang (hollowscale/training/recovery.py)."""
