"""The upstream sessions: how a request of the client reaches the upstream server and comes
back, in either era, with its input rounds, its tasks and its notifications."""
