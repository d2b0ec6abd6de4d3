"""``oneflow.core.record``: ``import recordkit.compat.oneflow.core.record.record_pb2 as ofrecord`` (OneFlow's path)."""
