"""The type mapping's Spark half: Iceberg types (``binlake.typemap``) as Spark SQL types, and
back.

``spark_type``, ``spark_field`` and ``spark_schema`` give the Spark form of a ``LakeColumn`` or
``LakeSchema`` (DataFrames built for appends and MERGEs); ``lake_type_of`` and
``lake_column_of_field`` read an Iceberg table's Spark schema back as the Iceberg types binlake
writes (``verify``, ``read_lake_schema``).
"""

from __future__ import annotations

from pyspark.sql import types as st

from binlake.errors import SparkStatementError
from binlake.typemap import IcebergType, LakeColumn, LakeSchema

#: The Spark type of each Iceberg type binlake writes (decimals aside).
_SPARK_TYPES: dict[IcebergType, type[st.DataType]] = {
    IcebergType.INT: st.IntegerType,
    IcebergType.LONG: st.LongType,
    IcebergType.FLOAT: st.FloatType,
    IcebergType.DOUBLE: st.DoubleType,
    IcebergType.DATE: st.DateType,
    IcebergType.TIMESTAMP: st.TimestampNTZType,
    IcebergType.TIMESTAMPTZ: st.TimestampType,
    IcebergType.STRING: st.StringType,
    IcebergType.BINARY: st.BinaryType,
}
_ICEBERG_TYPES = {spark: iceberg for iceberg, spark in _SPARK_TYPES.items()}


def spark_type(column: LakeColumn) -> st.DataType:
    if column.type is IcebergType.DECIMAL:
        return st.DecimalType(column.precision, column.scale)
    return _SPARK_TYPES[column.type]()


def spark_field(column: LakeColumn) -> st.StructField:
    return st.StructField(column.name, spark_type(column), column.nullable)


def spark_schema(schema: LakeSchema) -> st.StructType:
    return st.StructType([spark_field(column) for column in schema.columns])


def lake_type_of(data_type: st.DataType) -> tuple[IcebergType, int] | None:
    """(Iceberg type, decimal scale) of a Spark column type; None for types binlake never
    writes."""
    if isinstance(data_type, st.DecimalType):
        return IcebergType.DECIMAL, data_type.scale
    lake = _ICEBERG_TYPES.get(type(data_type))
    return None if lake is None else (lake, 0)


def lake_column_of_field(field: st.StructField, index: int, source_table: str) -> LakeColumn:
    """An Iceberg table's column (as Spark describes it) as a ``LakeColumn``: its type, its
    nullability, the source type from its comment ("" without one); ``index``: its position."""
    comment = str(field.metadata.get("comment", ""))
    data_type = field.dataType
    if isinstance(data_type, st.DecimalType):
        return LakeColumn(
            field.name,
            index,
            comment,
            IcebergType.DECIMAL,
            field.nullable,
            data_type.precision,
            data_type.scale,
        )
    lake = lake_type_of(data_type)
    if lake is None:
        raise SparkStatementError(
            f"column {field.name} has type {data_type.simpleString()}, which binlake does not "
            "write",
            table=source_table,
        )
    return LakeColumn(field.name, index, comment, lake[0], field.nullable)
