"""Arrow tables as Spark DataFrames, exactly (no pandas on the way).

pyspark 3.5 takes Arrow only through pandas (``createDataFrame(pandas_df)``), and pandas holds
timestamps as nanoseconds since 1970 in 64 bits: DATETIME values before 1677 or after 2262 would
not survive. So the table is written as an Arrow IPC stream to a temporary file and handed to
the JVM the way pyspark's own Arrow path does it (``PythonSQLUtils.readArrowStreamFromFile`` and
``PythonSQLUtils.toDataFrame``, internal API of the pinned pyspark 3.5.9, covered by the
integration tests). The JVM reads the whole file before the call returns; the file is removed
right after. The rows travel through the driver, so this works with any master.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from binlake.lake.spark.errors import spark_errors

if TYPE_CHECKING:
    import pyarrow as pa

_PYTHON_SQL_UTILS = "org.apache.spark.sql.api.python.PythonSQLUtils"


def dataframe_from_arrow(spark: SparkSession, table: pa.Table, schema: StructType) -> DataFrame:
    """A DataFrame holding ``table``'s rows with the Spark ``schema`` (the same columns, in the
    same order, with the Arrow types ``LakeColumn.arrow_type`` gives)."""
    import pyarrow as pa

    if table.schema.names != schema.names:
        raise ValueError(f"Arrow columns {table.schema.names} are not {schema.names}")
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    fd, path = tempfile.mkstemp(prefix="binlake-", suffix=".arrows")
    try:
        with os.fdopen(fd, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        with spark_errors("Arrow table to DataFrame"):
            utils = jvm.org.apache.spark.sql.api.python.PythonSQLUtils
            batches = utils.readArrowStreamFromFile(path)
            java_frame = utils.toDataFrame(batches, schema.json(), spark._jsparkSession)
    finally:
        os.unlink(path)
    return DataFrame(java_frame, spark)
