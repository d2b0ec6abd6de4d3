"""``recordkit.atomic`` moved to ``recordkit.storage.atomic`` (where bytes are written); the old name
keeps working."""
from recordkit.storage.atomic import (AtomicFile, discarded_targets, is_abandoned, note_discarded,  # noqa: F401
                                      remove_stale_temporaries, stale_temporaries, write_sidecar)

__all__ = ["AtomicFile", "discarded_targets", "is_abandoned", "note_discarded", "remove_stale_temporaries",
           "stale_temporaries", "write_sidecar"]
