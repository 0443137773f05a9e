"""The rules of the bridge: the translation between the revisions, the tables and the shapes.

Every module here is pure: no I/O, no threads, no clock."""
