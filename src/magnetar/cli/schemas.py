"""`magnetar admin schemas`: pulsar-admin's schema verbs.

    magnetar admin schemas get persistent://public/default/users [--version 1] [--all-version]
    magnetar admin schemas upload persistent://public/default/users --filename user-schema.json
    magnetar admin schemas compatibility persistent://public/default/users --filename user-schema.json
    magnetar admin schemas delete persistent://public/default/users

The file is pulsar-admin's: Pulsar's PostSchemaPayload, `{"type": "AVRO", "schema": "<the Avro
schema as a string>", "properties": {}}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from magnetar.cli.common import DEFAULT_URL, AuthParams, AuthPlugin, ServiceUrl, admin_client, call

console = Console()
schemas_app = typer.Typer(help="Topic schemas (the schema registry).", no_args_is_help=True)
Topic = Annotated[str, typer.Argument(help="persistent://tenant/namespace/topic (or a short name)")]
Filename = Annotated[Path, typer.Option("--filename", "-f", help="PostSchemaPayload JSON: type, schema, properties.",
                                        exists=True, dir_okay=False, readable=True)]


def _payload(filename: Path) -> dict[str, Any]:
    try:
        payload = json.loads(filename.read_text())
    except ValueError as exc:
        raise typer.BadParameter(f"{filename} is not JSON: {exc}", param_hint="--filename") from None
    if not isinstance(payload, dict) or "type" not in payload:
        raise typer.BadParameter(f'{filename}: expected {{"type": ..., "schema": ..., "properties": ...}}',
                                 param_hint="--filename")
    schema = payload.get("schema", "")
    if not isinstance(schema, str):  # pulsar-admin's files carry the definition as a string; take an object too
        schema = json.dumps(schema)
    return {"schema_type": payload["type"], "schema": schema, "properties": payload.get("properties") or {}}


@schemas_app.command("get")
def schemas_get(topic: Topic, version: Annotated[int | None, typer.Option("--version", help="A version.")] = None,
                all_version: Annotated[bool, typer.Option("--all-version", help="Every version.")] = False,
                service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                auth_params: AuthParams = None) -> None:
    """The topic's schema (the latest, one version, or all)."""
    admin = admin_client(service_url, auth_plugin, auth_params)
    if all_version:
        console.print_json(data=call(admin.get_all_schemas, topic))
    else:
        console.print_json(data=call(admin.get_schema, topic, version))


@schemas_app.command("upload")
def schemas_upload(topic: Topic, filename: Filename, service_url: ServiceUrl = DEFAULT_URL,
                   auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Upload a schema: a new version if the namespace's compatibility strategy accepts it."""
    version = call(admin_client(service_url, auth_plugin, auth_params).upload_schema, topic, **_payload(filename))
    console.print(f"schema of {topic}: version {version}")


@schemas_app.command("compatibility")
def schemas_compatibility(topic: Topic, filename: Filename, service_url: ServiceUrl = DEFAULT_URL,
                          auth_plugin: AuthPlugin = None, auth_params: AuthParams = None) -> None:
    """Would the topic accept this schema? (exit code 1 when not)"""
    result = call(admin_client(service_url, auth_plugin, auth_params).test_schema_compatibility, topic,
                  **_payload(filename))
    console.print_json(data=result)
    if not result.get("isCompatible"):
        raise typer.Exit(1)


@schemas_app.command("delete")
def schemas_delete(topic: Topic, service_url: ServiceUrl = DEFAULT_URL, auth_plugin: AuthPlugin = None,
                   auth_params: AuthParams = None) -> None:
    """Delete the topic's schema (its versions stay readable by number for the messages written with them)."""
    version = call(admin_client(service_url, auth_plugin, auth_params).delete_schema, topic)
    console.print(f"deleted the schema of {topic} (version {version})")


def register(admin_app: typer.Typer) -> None:
    admin_app.add_typer(schemas_app, name="schemas")
