"""The ``recordkit`` command line."""
