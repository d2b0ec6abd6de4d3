"""recordkit: read, write and feed to training the record formats of deep-learning frameworks."""
from recordkit.errors import FormatError, RecordkitError, RecordkitWarning

__version__ = "0.1.0"

# Names imported on first use, so that ``import recordkit`` (and ``recordkit --help``) pays for
# no NumPy/SciPy: a command imports only what it uses.
_LAZY = {"StreamSpec": "recordkit.engine.streams", "MinibatchSource": "recordkit.engine.source",
         "ChunkPartition": "recordkit.engine.chunk_partition", "CompositeDeserializer": "recordkit.engine.composite", "Mixture": "recordkit.engine.mixture"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'recordkit' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def from_config(text, **kwargs):
    """A MinibatchSource from a CNTK BrainScript reader section (see compat/config_source.py)."""
    from recordkit.compat.config_source import from_config as build
    return build(text, **kwargs)


def convert(src, dst, to=None, streams=None, **kwargs):
    """Convert ``src`` into ``dst`` in format ``to`` (any format of the registry; see
    ``recordkit.engine.convert.convert`` for the options); returns a ``Conversion``."""
    from recordkit.engine.convert import convert as run
    return run(src, dst, to, streams, **kwargs)


__all__ = ["ChunkPartition", "CompositeDeserializer", "FormatError", "MinibatchSource", "Mixture", "RecordkitError",
           "RecordkitWarning", "StreamSpec", "convert", "from_config", "__version__"]
