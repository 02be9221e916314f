"""Pulsar Functions on Magnetar: the registry, the code store and the state (`registry`), and
the admin API's trigger (`trigger`)."""
