"""``oneflow.core`` as far as data scripts import it: ``core.record.record_pb2``."""
