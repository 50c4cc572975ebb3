"""Consistent cuts: ``table`` (the cuts table: one cut per commit, retention, the tags that keep
a cut's snapshots) and ``read`` (every table as of one cut)."""
