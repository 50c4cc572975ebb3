"""The type mapping's Spark half: Iceberg types (``binlake.typemap``) as Spark SQL types, and
back.

``spark_type``, ``spark_field`` and ``spark_schema`` give the Spark form of a ``LakeColumn`` or
``LakeSchema`` (DataFrames built for appends and MERGEs); ``lake_type_of`` reads a Spark column
type back as the Iceberg type binlake writes (``verify``).
"""

from __future__ import annotations

from pyspark.sql import types as st

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
