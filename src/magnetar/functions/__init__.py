"""Pulsar Functions on Magnetar: the functions API (`Function`, `Context`, SerDe), a function's
configuration (Pulsar's FunctionConfig) and its state."""
