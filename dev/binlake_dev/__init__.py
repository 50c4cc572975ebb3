"""Development tools for binlake's tests, demo and benchmarks; not part of the binlake package.

``sandbox``: a throwaway MariaDB server in a temporary folder.
"""
