"""Pulsar's basic authentication provider (`AuthenticationProviderBasic`): users and their hashed
passwords in an htpasswd file; a caller's role is its user name.

The file is what `htpasswd` writes, one `user:hash` line per user, blank lines and `#` comments
ignored. As Pulsar, two hash formats are accepted: Apache's MD5 (`$apr1$...`, `htpasswd -m`, the
recommended one) and CRYPT (`htpasswd -d`); any other (bcrypt, SHA, plain text) is refused when the
file is read, so a line Pulsar would not accept never authenticates here either. Hashing and the
htpasswd format are libpass's (`passlib.apache.HtpasswdFile`, the maintained passlib), not ours.

Where the file comes from, as Pulsar's `basicAuthConf`: `MAGNETAR_AUTH_BASIC_CONF` = `file:///path`,
a plain path, `data:;base64,...`, or the file's contents in base64. On AWS the stack names a
Secrets Manager secret holding the file's text (`MAGNETAR_AUTH_BASIC_SECRET`, re-read at most
every 5 minutes, so adding or removing a user needs no deploy).

Credentials arrive as HTTP `Authorization: Basic base64(user:password)` (the HTTP and WebSocket
APIs) or as the binary protocol's CONNECT with method `basic` and data `user:password` (what the
official clients' `AuthenticationBasic` sends).
"""

from __future__ import annotations

import base64
import binascii
import os
from functools import cache
from pathlib import Path

from passlib.apache import HtpasswdFile
from passlib.context import CryptContext
from passlib.hash import apr_md5_crypt

from magnetar.config import ENV_BASIC_AUTH_CONF, ENV_BASIC_AUTH_SECRET

SECRET_CACHE_S = 300  # the users' secret is re-read at most this often (as the token keys)
SCHEMES = ("apr_md5_crypt", "des_crypt")  # Pulsar's MD5 ($apr1$) and CRYPT
REFUSED = "Unknown user or wrong password"  # one reason for both: which user names exist is not told


class InvalidCredentials(Exception):
    """Basic credentials that do not authenticate (HTTP 401)."""


class BasicUsers:
    """The users of one htpasswd file, checked against their hashes."""

    def __init__(self, text: str) -> None:
        context = CryptContext(schemes=list(SCHEMES))
        try:
            self._file = HtpasswdFile.from_string(text, context=context)
        except ValueError as exc:
            raise ValueError(f"The basic authentication file is not an htpasswd file: {exc}") from None
        for user in self._file.users():
            stored = self._file.get_hash(user)
            if stored is None or context.identify(stored) is None:
                raise ValueError(f"The basic authentication file's line for {user!r} is neither MD5 ($apr1$, "
                                 "htpasswd -m) nor CRYPT (htpasswd -d), the formats Pulsar accepts")
        # verified against when the user is unknown, so an unknown name costs as long as a wrong password
        self._decoy = apr_md5_crypt.hash("magnetar-decoy")
        self._context = context

    def __len__(self) -> int:
        return len(self._file.users())

    def role(self, user: str, password: str) -> str:
        """The role of `user` if `password` is its password; else `InvalidCredentials`."""
        stored = self._file.get_hash(user) if user else None
        if stored is None:
            self._context.verify(password, self._decoy)
            raise InvalidCredentials(REFUSED)
        if not self._context.verify(password, stored):
            raise InvalidCredentials(REFUSED)
        return user


def split_credentials(data: str) -> tuple[str, str]:
    """`user:password` (the binary protocol's auth data, a Basic header's decoded value): the user
    name ends at the first colon, as in Pulsar (a password may hold colons, a user name not)."""
    user, colon, password = data.partition(":")
    if not colon or not user:
        raise InvalidCredentials("Malformed basic credentials: expected user:password")
    return user, password


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    """The user and password of an `Authorization: Basic <base64(user:password)>` header (None for
    another scheme or none); `InvalidCredentials` when it is Basic but unreadable."""
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise InvalidCredentials("Malformed basic credentials: not base64 of user:password") from None
    return split_credentials(decoded)


def read_conf(spec: str) -> str:
    """The htpasswd text Pulsar's `basicAuthConf` names: `file:///path`, a path, `data:;base64,...`,
    or the contents in base64."""
    if spec.startswith("data:"):
        return base64.b64decode(spec.partition(",")[2]).decode("utf-8")
    if spec.startswith("file:"):
        return Path(spec.removeprefix("file://").removeprefix("file:")).expanduser().read_text()
    path = Path(spec).expanduser()
    if path.is_file():
        return path.read_text()
    try:
        return base64.b64decode(spec, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ValueError(f"{ENV_BASIC_AUTH_CONF}: {spec!r} is no file, nor base64 of an htpasswd file") from None


@cache
def _users_of(text: str) -> BasicUsers:
    return BasicUsers(text)


@cache
def _users_of_conf(spec: str) -> BasicUsers:
    return BasicUsers(read_conf(spec))  # read once, as Pulsar reads basicAuthConf at start


def users_from_environment() -> BasicUsers | None:
    """The users this process accepts (None: basic authentication is off): the Secrets Manager
    secret named by MAGNETAR_AUTH_BASIC_SECRET, else the file MAGNETAR_AUTH_BASIC_CONF names."""
    secret_id = os.environ.get(ENV_BASIC_AUTH_SECRET)
    if secret_id:
        from aws_lambda_powertools.utilities import parameters

        value = parameters.get_secret(secret_id, max_age=SECRET_CACHE_S)
        return _users_of(value if isinstance(value, str) else value.decode())
    spec = os.environ.get(ENV_BASIC_AUTH_CONF)
    return _users_of_conf(spec) if spec else None


def authenticate(user: str, password: str) -> str:
    """The role of these credentials under this process's configuration; `InvalidCredentials`
    when they do not authenticate or basic authentication is off."""
    users = users_from_environment()
    if users is None:
        raise InvalidCredentials(f"Basic authentication is not enabled (no {ENV_BASIC_AUTH_CONF})")
    return users.role(user, password)
