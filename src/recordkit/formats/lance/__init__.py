"""Lance data sets (``pip install 'recordkit[lance]'``): ``reader.LanceDeserializer`` (fragments as
chunks, random access by Lance's ``take``), ``writer.LanceWriter`` (the Parquet mapping's columns,
``formats/parquet/arrow.py``); the streams of data sets written by other tools are those their column
types imply (``formats/arrow_layouts.py``, shared with Parquet and Hugging Face).

The package imports nothing heavy: the registry names the modules, so ``probe`` stays free of
``lance`` and ``pyarrow``."""
