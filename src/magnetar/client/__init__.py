"""The Python SDK (see `magnetar.Client`)."""
