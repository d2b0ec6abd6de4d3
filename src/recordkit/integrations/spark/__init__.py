"""Apache Spark (4.0+) integration: recordkit data as a Python data source (``pip install 'recordkit[spark]'``).

::

    from pyspark.sql import SparkSession
    from recordkit.integrations.spark import register

    spark = SparkSession.builder.getOrCreate()
    register(spark)
    df = spark.read.format("recordkit").load("train.cbf")             # every recorded stream
    df = (spark.read.format("recordkit").option("streams", "x=dense:3,y=sparse:5")
          .load("train.ctf"))                                          # CTF needs its streams
    df.write.format("recordkit").option("to", "cbf").save("out_cbf")  # part-NNNNN.cbf, published whole

Partitions are the input's chunks (``source``); rows are sequences: ``key`` (long), a dense
stream as ``array<array<float>>`` (one array per sample), a sparse one as
``array<struct<indices: array<int>, values: array<float>>>`` (``_columns``). Writing goes
through recordkit's writers, one output per task, joined and published by ``commit()``
(``sink``). Spark runs the data source in its Python workers, which must import recordkit
(and pyarrow); paths must name the same files on every node (local or a shared file system).
"""
from __future__ import annotations

try:
    from pyspark.sql.datasource import DataSource  # noqa: F401
except ImportError as e:  # pragma: no cover - exercised only without Spark 4
    raise ImportError("recordkit.integrations.spark needs PySpark 4: pip install 'recordkit[spark]'") from e

from recordkit.integrations.spark.sink import RecordkitWriter
from recordkit.integrations.spark.source import RecordkitDataSource, RecordkitReader

__all__ = ["register", "RecordkitDataSource", "RecordkitReader", "RecordkitWriter"]


def register(spark) -> None:
    """Make ``spark.read.format("recordkit")`` / ``df.write.format("recordkit")`` available in a session."""
    spark.dataSource.register(RecordkitDataSource)
