"""The `magnetar` command line (typer + rich)."""
