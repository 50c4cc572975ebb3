"""Iceberg SQL text and schema plans (pure, no Spark): ``sql`` (quoting, CREATE TABLE with the
table's layout), ``evolution`` (the lake schema a TABLE_MAP gives, and the schema changes an
ALTER or a new TABLE_MAP asks for), ``alterations`` (those changes as ALTER TABLE text),
``backfill`` (the UPDATE that gives existing rows an added column's value)."""
