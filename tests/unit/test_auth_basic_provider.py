"""Pulsar's basic provider (magnetar.security.basic) and the authorizer's answer for Basic credentials
(magnetar.security.identity.authenticate_request): the htpasswd formats Pulsar accepts, the forms of
basicAuthConf, and refusals that are reasons, not failures."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from passlib.hash import apr_md5_crypt, des_crypt

from magnetar.config import ENV_BASIC_AUTH_CONF
from magnetar.security import basic, identity

# `htpasswd -cmb .htpasswd superuser admin`, from Pulsar's documentation
PULSAR_DOC_LINE = "superuser:$apr1$GBIYZYFZ$MzLcPrvoUky16mLcK6UtX/\n"


def _header(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_md5_and_crypt_users_authenticate_as_their_names() -> None:
    users = basic.BasicUsers(PULSAR_DOC_LINE + "# a comment\n\n" + f"bob:{des_crypt.hash('bob-pw')}\n")
    assert len(users) == 2
    assert users.role("superuser", "admin") == "superuser"
    assert users.role("bob", "bob-pw") == "bob"
    for user, password in (("superuser", "wrong"), ("bob", "admin"), ("nobody", "admin"), ("", "admin")):
        with pytest.raises(basic.InvalidCredentials, match="Unknown user or wrong password"):
            users.role(user, password)


@pytest.mark.parametrize("line", ["carol:$2y$05$pthxvn2t8b9rF9gF1FhvrutHKik/goGxVx5cOZ2fcXwrJ5Nwz5rXe",
                                  "carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", "carol:plain-text"])
def test_formats_pulsar_does_not_accept_are_refused_when_read(line: str) -> None:
    with pytest.raises(ValueError, match="carol"):
        basic.BasicUsers(line + "\n")


def test_basic_auth_conf_forms(tmp_path: Path) -> None:
    text = f"alice:{apr_md5_crypt.hash('pw')}\n"
    path = tmp_path / ".htpasswd"
    path.write_text(text)
    encoded = base64.b64encode(text.encode()).decode()
    for spec in (f"file://{path}", str(path), f"data:;base64,{encoded}", encoded):
        assert basic.read_conf(spec) == text, spec
    with pytest.raises(ValueError, match=ENV_BASIC_AUTH_CONF):
        basic.read_conf("/no/such/file")


def test_credentials_split_at_the_first_colon() -> None:
    assert basic.split_credentials("alice:pw:with:colons") == ("alice", "pw:with:colons")
    assert basic.basic_credentials("Basic " + base64.b64encode(b"alice:").decode()) == ("alice", "")
    assert basic.basic_credentials("Bearer abc") is None and basic.basic_credentials(None) is None
    for bad in ("Basic %%%", "Basic " + base64.b64encode(b"no-colon").decode(),
                "Basic " + base64.b64encode(b":no-user").decode()):
        with pytest.raises(basic.InvalidCredentials, match="Malformed"):
            basic.basic_credentials(bad)


def test_the_authorizer_answers_a_role_or_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / ".htpasswd"
    path.write_text(PULSAR_DOC_LINE)
    monkeypatch.setenv(ENV_BASIC_AUTH_CONF, f"file://{path}")
    assert identity.authenticate_request(_header("superuser", "admin"), {}) == {"role": "superuser"}
    assert identity.authenticate_request(_header("superuser", "nope"), {}) == {
        "refused": "Unknown user or wrong password"}
    assert "Malformed" in identity.authenticate_request({"authorization": "basic !!"}, {})["refused"]
    assert "No credentials" in identity.authenticate_request({}, {})["refused"]
    # a provider that cannot be read refuses with the reason instead of failing the authorizer
    monkeypatch.setenv(ENV_BASIC_AUTH_CONF, f"file://{tmp_path}/missing")
    assert "not available" in identity.authenticate_request(_header("superuser", "admin"), {})["refused"]
    monkeypatch.delenv(ENV_BASIC_AUTH_CONF)
    assert "not enabled" in identity.authenticate_request(_header("superuser", "admin"), {})["refused"]
