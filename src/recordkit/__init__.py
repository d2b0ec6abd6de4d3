"""recordkit: read, write and feed to training the record formats of deep-learning frameworks."""
from recordkit.errors import FormatError, RecordkitError, RecordkitWarning
from recordkit.engine.streams import StreamSpec

__version__ = "0.1.0"


def from_config(text, **kwargs):
    """A MinibatchSource from a CNTK BrainScript reader section (see compat/config_source.py)."""
    from recordkit.compat.config_source import from_config as build
    return build(text, **kwargs)


__all__ = ["FormatError", "RecordkitError", "RecordkitWarning", "StreamSpec", "from_config", "__version__"]
