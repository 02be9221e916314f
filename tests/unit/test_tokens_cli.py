"""`magnetar tokens`: Pulsar's verbs over magnetar.security.tokens, through typer's CliRunner."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import jwt
import pytest
from typer.testing import CliRunner

from magnetar.cli.main import app
from magnetar.security.tokens import (
    SECRET_KEY_BYTES,
    TokenValidator,
    read_key_material,
    secret_verification_key,
)

runner = CliRunner()


def tokens(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["tokens", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def secret_key(tmp_path: Path) -> Path:
    path = tmp_path / "secret.key"
    code, _, _ = tokens("create-secret-key", "--output", str(path))
    assert code == 0
    return path


def _create(*args: str) -> str:
    code, out, err = tokens("create", *args)
    assert code == 0, err
    return out.strip().splitlines()[-1]


def test_secret_key_is_raw_bytes_or_base64(tmp_path: Path, secret_key: Path) -> None:
    assert len(secret_key.read_bytes()) == SECRET_KEY_BYTES
    assert secret_key.stat().st_mode & 0o077 == 0  # readable by its owner only
    text = tmp_path / "secret.b64"
    assert tokens("create-secret-key", "--output", str(text), "--base64")[0] == 0
    assert len(base64.b64decode(text.read_text())) == SECRET_KEY_BYTES


def test_create_then_validate_round_trip(secret_key: Path) -> None:
    token = _create("--secret-key", f"file://{secret_key}", "--subject", "test-user")
    assert token.count(".") == 2
    # the broker's validator (same key material) accepts it as the role
    validator = TokenValidator([secret_verification_key(read_key_material(str(secret_key)))])
    assert validator.role(token) == "test-user"
    for source in (("--token", token), (token,), ("-sk",)):
        args = ["validate", *source] if source[0] != "-sk" else ["validate"]
        code, out, err = tokens(*args, "--secret-key", str(secret_key), stdin=token if source == ("-sk",) else None)
        assert code == 0, err
        assert json.loads(out) == {"sub": "test-user"}


def test_key_given_as_data_url_and_token_file(tmp_path: Path, secret_key: Path) -> None:
    data_url = "data:;base64," + base64.b64encode(secret_key.read_bytes()).decode()
    token = _create("--secret-key", data_url, "-s", "app", "--expiry-time", "10m")
    token_file = tmp_path / "app.token"
    token_file.write_text(token + "\n")
    code, out, _ = tokens("validate", "--token-file", str(token_file), "--secret-key", str(secret_key))
    claims = json.loads(out)
    assert code == 0 and claims["sub"] == "app"
    assert 590 <= claims["exp"] - time.time() <= 600


def test_rs256_key_pair(tmp_path: Path) -> None:
    private, public = tmp_path / "my-private.key", tmp_path / "my-public.key"
    code, _, err = tokens("create-key-pair", "--output-private-key", str(private), "--output-public-key", str(public))
    assert code == 0, err
    token = _create("--private-key", f"file://{private}", "--subject", "svc", "--expiry-time", "1d")
    assert jwt.get_unverified_header(token)["alg"] == "RS256"
    code, out, _ = tokens("validate", "--public-key", str(public), "--token", token)
    assert code == 0 and json.loads(out)["sub"] == "svc"
    other_private, other_public = tmp_path / "o-private.key", tmp_path / "o-public.key"
    tokens("create-key-pair", "--output-private-key", str(other_private), "--output-public-key", str(other_public))
    code, _, err = tokens("validate", "--public-key", str(other_public), "--token", token)
    assert code == 1 and "does not verify" in err


def test_expired_token_fails_validation(secret_key: Path) -> None:
    token = _create("--secret-key", str(secret_key), "--subject", "brief", "--expiry-time", "1s")
    time.sleep(2.1)
    code, out, err = tokens("validate", "--secret-key", str(secret_key), "--token", token)
    assert code == 1 and out == ""
    assert "expired" in err.lower()


def test_invalid_input_exits_1_with_a_message(tmp_path: Path, secret_key: Path) -> None:
    token = _create("--secret-key", str(secret_key), "--subject", "x")
    other = tmp_path / "other.key"
    tokens("create-secret-key", "--output", str(other))
    assert tokens("validate", "--secret-key", str(other), "--token", token)[0] == 1
    code, _, err = tokens("validate", "--secret-key", str(secret_key), "--token", "not-a-jwt")
    assert code == 1 and "Malformed" in err
    code, _, err = tokens("create", "--subject", "x")
    assert code == 1 and "exactly one" in err
    code, _, err = tokens("create", "--secret-key", str(tmp_path / "missing.key"), "--subject", "x")
    assert code == 1 and "cannot read" in err
    code, _, err = tokens("create", "--secret-key", str(secret_key), "--subject", "x", "--expiry-time", "soon")
    assert code == 1 and "Invalid duration" in err
    code, _, err = tokens("create", "--secret-key", str(secret_key), "--subject", "")
    assert code == 1 and "subject" in err


def test_show_decodes_without_verifying(secret_key: Path) -> None:
    token = _create("--secret-key", str(secret_key), "--subject", "viewer", "--expiry-time", "1s")
    time.sleep(1.1)  # expired, and shown all the same
    code, out, _ = tokens("show", "--token", token)
    header, claims = out.split("---\n")
    assert code == 0
    assert json.loads(header) == {"alg": "HS256", "typ": "JWT"}
    assert json.loads(claims)["sub"] == "viewer"
    assert tokens("show", "--token", "garbage")[0] == 1
