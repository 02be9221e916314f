"""Presigned GET URLs of segment objects, for readers that fetch S3 themselves (read plans).

A presigned URL carries the broker's own authority for one object for a while, so a Spark
executor needs no AWS credentials of its own: the broker decides who may read (the plan route is
authorized like a read) and S3 serves the bytes. The URL covers the whole object; the reader sends
a `Range` header (not part of the signature) for the slice it needs.

SigV4 (`X-Amz-Credential=.../s3/aws4_request`), so the local emulator's endpoint sees it as an S3
GET (and applies S3's per-prefix limits) and AWS accepts it in every region. Endpoints come from
the standard configuration only (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`): on the emulator the
URL is `http://127.0.0.1:4566/<bucket>/<key>?...` (path style), on AWS
`https://<bucket>.s3.<region>.amazonaws.com/<key>?...`. Signing makes no request.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import boto3
from botocore.config import Config

from magnetar.config import ResourceNames

DEFAULT_EXPIRES_S = 3600
MAX_EXPIRES_S = 12 * 3600  # a URL never outlives the credentials that signed it anyway


def presigner(bucket: str | None = None) -> Any:
    """`sign(key, expires_s) -> url` for the segment bucket (this process's endpoint and credentials)."""
    name = bucket or ResourceNames.from_env().bucket
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    s3 = _signing_client(endpoint)

    def sign(key: str, expires_s: int = DEFAULT_EXPIRES_S) -> str:
        url: str = s3.generate_presigned_url("get_object", Params={"Bucket": name, "Key": key},
                                             ExpiresIn=max(1, min(int(expires_s), MAX_EXPIRES_S)))
        return url

    return sign


@cache
def _signing_client(endpoint: str | None) -> Any:
    # A client of its own: S3's regional endpoint and SigV4 always (the default client may pick
    # the global endpoint, whose URLs fail outside us-east-1 until the bucket's DNS propagates).
    config = Config(signature_version="s3v4", s3={"addressing_style": "path" if endpoint else "virtual"})
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return boto3.session.Session().client("s3", region_name=region, endpoint_url=endpoint,
                                          config=config)
