"""Magnetar's core: Pulsar's managed ledger, cursors and dispatch in plain Python.

Nothing here imports boto3: the core talks to storage through the small ports in
`magnetar.core.ports`, implemented in memory (`magnetar.adapters.memory`) for unit tests and on
AWS (`magnetar.adapters.aws`) for the Lambda functions.
"""
