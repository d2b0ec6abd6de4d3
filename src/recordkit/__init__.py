"""recordkit: read, write and feed to training the record formats of deep-learning frameworks."""
from recordkit.errors import FormatError, RecordkitError, RecordkitWarning
from recordkit.engine.streams import StreamSpec

__version__ = "0.1.0"

__all__ = ["FormatError", "RecordkitError", "RecordkitWarning", "StreamSpec", "__version__"]
