"""Development tools for binlake's tests, demo and benchmarks; not part of the binlake package.

``sandbox``: a throwaway MariaDB server in a temporary folder. ``postgres``: a throwaway
PostgreSQL server (the database of Iceberg's JDBC catalog). ``cluster``: a Spark standalone
master and worker from pyspark's own distribution. ``procs``: their child processes.
``powercut``: a FUSE file system that drops what was not fsynced, as a power cut would.
``readers``: a table of the embedded warehouse read through Spark SQL, PyIceberg or DuckDB.
"""
