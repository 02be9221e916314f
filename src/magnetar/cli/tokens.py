"""`magnetar tokens`: Pulsar's `pulsar tokens` verbs (keys, tokens, validation) over
`magnetar.security.tokens`, with the same formats, so keys and tokens move between the two.

    magnetar tokens create-secret-key --output my-secret.key            # raw bytes (--base64: text)
    magnetar tokens create --secret-key file:///path/my-secret.key --subject test-user --expiry-time 1d
    magnetar tokens create-key-pair --output-private-key my-private.key --output-public-key my-public.key
    magnetar tokens create --private-key my-private.key --subject test-user
    magnetar tokens validate --secret-key my-secret.key --token "$TOKEN"         # or -f FILE, or stdin
    magnetar tokens show --token "$TOKEN"

A key is given as a path, `file:///path` or `data:;base64,...` (as the broker's settings give it).
Tokens and claims go to standard output unwrapped (the token is the last line of `create`);
messages go to standard error; a refused token or bad input exits with code 1.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from magnetar.cli.errors import fail

tokens_app = typer.Typer(help="Create and check Pulsar tokens and their keys (like `pulsar tokens`).",
                         no_args_is_help=True)

KeySpec = "a path, file:///path or data:;base64,..."


_fail = fail


def _write_key(path: Path, data: bytes, private: bool = True) -> None:
    """Write a key (a private one readable by its owner only), its directory made if need be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as exc:
        _fail(f"cannot write {path}: {exc.strerror or exc}")


def _key(spec: str, what: str) -> bytes:
    from magnetar.security.tokens import read_key_material

    try:
        return read_key_material(spec)
    except (OSError, ValueError) as exc:
        _fail(f"cannot read the {what} {spec!r}: {exc}")


def _token_text(token: str | None, token_file: Path | None, stdin: bool) -> str:
    """The token from --token (or the argument), --token-file, or standard input."""
    if token_file is not None:
        try:
            text = token_file.read_text()
        except OSError as exc:
            _fail(f"cannot read {token_file}: {exc}")
    elif token:
        text = token
    elif stdin or not sys.stdin.isatty():
        text = sys.stdin.read()
    else:
        _fail("give the token: --token TOKEN, --token-file FILE, or on standard input")
    text = text.strip()
    if text.startswith("token:"):
        text = text[len("token:"):].strip()
    if not text:
        _fail("the token is empty")
    return text


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=True))


@tokens_app.command("create-secret-key")
def create_secret_key(
    output: Annotated[Path | None, typer.Option("--output", "-o",
                                                help="File to write the key to (default: standard output).")] = None,
    base64_encode: Annotated[bool, typer.Option("--base64", "-b", help="Write the key base64-encoded.")] = False,
) -> None:
    """A new secret key for HS256 tokens (32 random bytes; the broker's token secret key)."""
    from magnetar.security.tokens import new_secret_key

    key = new_secret_key()
    data = base64.b64encode(key) if base64_encode else key
    if output is None:
        sys.stdout.buffer.write(data + (b"\n" if base64_encode else b""))
        sys.stdout.flush()
        return
    _write_key(output, data)
    typer.echo(f"wrote the secret key to {output}", err=True)


@tokens_app.command("create-key-pair")
def create_key_pair(
    output_private_key: Annotated[Path, typer.Option("--output-private-key", help="File for the private key (DER).")],
    output_public_key: Annotated[Path, typer.Option("--output-public-key", help="File for the public key (DER).")],
) -> None:
    """A new RSA key pair for RS256 tokens: the private key signs (keep it), the public key is the broker's."""
    from magnetar.security.tokens import new_key_pair

    private, public = new_key_pair()
    _write_key(output_private_key, private)
    _write_key(output_public_key, public, private=False)
    typer.echo(f"wrote the private key to {output_private_key} and the public key to {output_public_key}", err=True)


@tokens_app.command("create")
def create(
    subject: Annotated[str, typer.Option("--subject", "-s", help="The role the token authenticates as.")],
    secret_key: Annotated[str | None, typer.Option("--secret-key", "-sk", help=f"HS256 secret key: {KeySpec}.")] = None,
    private_key: Annotated[str | None, typer.Option("--private-key", "-pk", help=f"RS256 private key: {KeySpec}.")] = None,
    expiry_time: Annotated[str | None, typer.Option("--expiry-time", "-e",
                                                    help="Relative expiry: 30s, 10m, 3h, 1d, 2w, 1y (default: never).")] = None,
) -> None:
    """A token for a role, signed with a secret key (HS256) or a private key (RS256); printed as the last line."""
    from magnetar.security.tokens import create_token, parse_duration

    if (secret_key is None) == (private_key is None):
        _fail("give exactly one of --secret-key or --private-key")
    try:
        expires_in = parse_duration(expiry_time) if expiry_time is not None else None
        token = create_token(
            subject,
            secret_key=_key(secret_key, "secret key") if secret_key is not None else None,
            private_key=_key(private_key, "private key") if private_key is not None else None,
            expires_in_s=expires_in,
        )
    except ValueError as exc:
        _fail(str(exc))
    typer.echo(token)


TokenOption = Annotated[str | None, typer.Option("--token", "-t", help="The token.")]
TokenArgument = Annotated[str | None, typer.Argument(help="The token (or --token, --token-file, standard input).",
                                                     show_default=False)]
TokenFile = Annotated[Path | None, typer.Option("--token-file", "-f", help="Read the token from this file.")]
Stdin = Annotated[bool, typer.Option("--stdin", "-i", help="Read the token from standard input.")]


@tokens_app.command("validate")
def validate(
    token_argument: TokenArgument = None,
    token: TokenOption = None,
    token_file: TokenFile = None,
    stdin: Stdin = False,
    secret_key: Annotated[str | None, typer.Option("--secret-key", "-sk", help=f"HS256 secret key: {KeySpec}.")] = None,
    public_key: Annotated[str | None, typer.Option("--public-key", "-pk", help=f"RS256 public key: {KeySpec}.")] = None,
) -> None:
    """Check a token's signature and expiry as the broker does; print its claims (exit 1 if refused)."""
    from magnetar.security.tokens import (
        InvalidToken,
        TokenValidator,
        public_verification_key,
        secret_verification_key,
    )

    if (secret_key is None) == (public_key is None):
        _fail("give exactly one of --secret-key or --public-key")
    text = _token_text(token or token_argument, token_file, stdin)
    try:
        key = (secret_verification_key(_key(secret_key, "secret key")) if secret_key is not None
               else public_verification_key(_key(public_key or "", "public key")))
    except ValueError as exc:
        _fail(str(exc))
    try:
        claims = TokenValidator([key]).claims(text)
    except InvalidToken as exc:
        _fail(f"invalid token: {exc}")
    _print_json(claims)


@tokens_app.command("show")
def show(
    token_argument: TokenArgument = None,
    token: TokenOption = None,
    token_file: TokenFile = None,
    stdin: Stdin = False,
) -> None:
    """Print a token's header and claims WITHOUT checking its signature (as `pulsar tokens show`)."""
    import jwt

    text = _token_text(token or token_argument, token_file, stdin)
    try:
        header = jwt.get_unverified_header(text)
        claims = jwt.decode(text, options={"verify_signature": False, "verify_exp": False})
    except jwt.PyJWTError as exc:
        _fail(f"malformed token: {exc}")
    _print_json(header)
    typer.echo("---")
    _print_json(claims)
