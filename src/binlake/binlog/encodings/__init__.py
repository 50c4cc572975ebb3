"""How MySQL and MariaDB encode one value type (pure): ``temporal`` (DATE, TIME, DATETIME,
TIMESTAMP), ``decimals`` (DECIMAL), ``mysql_json`` (MySQL's binary JSON), ``charsets``
(collation ids and text codecs), ``mariadb_types`` (UUID, INET4, INET6)."""
