"""The front end: the connection to the client (VS Code), its lifecycle table, its output and the
slots of its requests."""
