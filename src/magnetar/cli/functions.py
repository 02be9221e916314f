"""`magnetar functions`: pulsar-admin functions' verbs (localrun in cli/functions_localrun.py)."""

from __future__ import annotations

import typer

from magnetar.cli import functions_localrun

functions_app = typer.Typer(help="Pulsar Functions: run functions written for Pulsar.", no_args_is_help=True)
functions_localrun.register(functions_app)
