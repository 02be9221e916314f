"""SegmentStore on S3: write-once objects (If-None-Match: *) and ranged GETs."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from magnetar.adapters.aws.clients import client
from magnetar.core.errors import NotFound, RetryableError


class S3SegmentStore:
    def __init__(self, bucket: str, s3: Any | None = None) -> None:
        self.bucket = bucket
        self.s3 = s3 or client("s3")

    def put_if_absent(self, key: str, data: bytes) -> bool:
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "412"):
                return False
            if code in ("ConditionalRequestConflict", "409"):
                raise RetryableError(f"concurrent write of segment {key}") from exc
            raise

    def get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            response = self.s3.get_object(Bucket=self.bucket, Key=key, Range=f"bytes={start}-{end - 1}")
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code", "") in ("NoSuchKey", "404"):
                raise NotFound(f"segment {key} was deleted") from exc
            raise
        data: bytes = response["Body"].read()
        return data

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):  # DeleteObjects takes up to 1,000 keys per request
            chunk = keys[i : i + 1000]
            response = self.s3.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True}
            )
            errors = [e for e in response.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if errors:
                raise RetryableError(f"could not delete {len(errors)} segment objects: {errors[0].get('Message')}")

    def list_keys(self, prefix: str) -> list[str]:
        keys: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return keys
