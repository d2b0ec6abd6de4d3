"""Lance data sets (``pip install 'recordkit[lance]'``): ``reader.LanceDeserializer`` (fragments as
chunks, random access by Lance's ``take``), ``writer.LanceWriter`` (the Parquet mapping's columns,
``formats/parquet/arrow.py``) and ``columns.py`` (the streams of data sets written by other tools).

The package imports nothing heavy: the registry names the modules, so ``probe`` stays free of
``lance`` and ``pyarrow``."""
