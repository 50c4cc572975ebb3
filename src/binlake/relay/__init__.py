"""The relay log: the hand-off between the receiver and the applier.

``writer`` (the receiver's ``RelayLogWriter``: verbatim events, caller-decided fsync, rotation),
``restart`` (where the receiver resumes, derived from the relay log alone, and the source
context every relay file starts with), ``handoff`` (``RelayProgress``: the durable end the
receiver publishes to an applier in the same process), ``reader`` (the applier's
``RelayReader``), ``scan`` (``RelayFollower``: the relay log's transactions and the tables they
touch, for ``status`` and ``verify``).
"""

#: The relay files' base name: ``relay-bin.000001``, ``relay-bin.000002``, ...
DEFAULT_BASENAME = "relay-bin"
#: The relay index's file name in the relay folder.
INDEX_NAME = f"{DEFAULT_BASENAME}.index"
