"""Pure binlog v4 format code: bytes in, frozen dataclasses out.

No I/O, and no imports from binlake outside this package.
"""
