"""The metrics Magnetar's functions emit (CloudWatch namespace `Magnetar`), by name.

One place for the names the core and the handlers emit and the stack's dashboard and alarms read
(infra/magnetar_cdk/dashboard.py, alarms.py). Every metric has the dimension `service` (the
function: magnetar-broker, magnetar-journal-consumer, ...); those marked "per namespace" also come
with `namespace` (`tenant/ns`), in the same EMF line under both dimension sets.
"""

from __future__ import annotations

CLOUDWATCH_NAMESPACE = "Magnetar"
SERVICE_DIMENSION = "service"  # Powertools' dimension: the function's POWERTOOLS_SERVICE_NAME
NAMESPACE_DIMENSION = "namespace"  # tenant/namespace
AWS_SERVICE_DIMENSION = "AwsService"  # dynamodb, kinesis, s3, lambda, ... (AWS calls' throttles and retries)

# --- publishing (broker, WebSocket, per namespace) --------------------------------------------
PUBLISHED_MESSAGES = "PublishedMessages"
PUBLISHED_BYTES = "PublishedBytes"  # payload bytes as stored (compressed by the producer)
PUBLISH_ERRORS = "PublishErrors"  # the broker's failures: journal refused, deadline passed, AWS errors
PUBLISH_REFUSED = "PublishRefused"  # the caller's: rate limits, backlog quotas, sizes, fenced producers
DEAD_LETTERED_MESSAGES = "DeadLetteredMessages"  # published to a dead-letter topic (`...-DLQ`)

# --- dispatching (broker, WebSocket, journal consumer, maintenance, per namespace) -------------
DISPATCHED_MESSAGES = "DispatchedMessages"  # handed to consumers by long polling
PUSHED_MESSAGES = "PushedMessages"  # handed to consumers over WebSocket connections
END_TO_END_LATENCY = "EndToEndLatency"  # publish time -> first delivery, ms (percentiles)

# --- the ledger (journal consumer) ------------------------------------------------------------
SEALED_ENTRIES = "SealedEntries"
SEGMENTS_WRITTEN = "SegmentsWritten"
HOLES = "Holes"
LATE_AFTER_HOLE = "LateAfterHole"  # an acknowledged entry consumers will never see: an incident
LATE_REAPPENDED = "LateReappended"
LATE_DEAD_LETTERED = "LateDeadLettered"

# --- maintenance (per namespace) --------------------------------------------------------------
BACKLOG_ENTRIES = "BacklogEntries"  # entries behind the slowest cursor, summed over the namespace's topics
BACKLOG_BYTES = "BacklogBytes"  # of the topics with a backlog quota (measured for the quota)
BACKLOG_QUOTA_RATIO = "BacklogQuotaRatio"  # the namespace's fullest topic: backlog / quota (1 = at the quota)
TOPICS_MAINTAINED = "TopicsMaintained"  # the run's totals (the function's own)
EXPIRED_ENTRIES = "ExpiredEntries"
EVICTED_ENTRIES = "EvictedEntries"
TRIMMED_SEGMENTS = "TrimmedSegments"
BACKLOG_BLOCKED_TOPICS = "BacklogBlockedTopics"
REDISPATCHED = "Redispatched"  # pushes of the run: due redeliveries, what failed pushes left

# --- the functions ----------------------------------------------------------------------------
COLD_START = "ColdStart"
AUTHORIZER_DENIALS = "AuthorizerDenials"  # requests the authorizer found no role for (bad or expired credentials)
AUTHORIZATIONS = "Authorizations"
AWS_THROTTLES = "AwsThrottles"  # AWS answered a throttling error (per AwsService); the SDK retries
AWS_RETRIES = "AwsRetries"  # AWS requests sent again (throttles, 5xx, timeouts; per AwsService)
S3_GET_REQUESTS = "S3GetRequests"  # the cost model's S3 requests, counted where they are made
S3_PUT_REQUESTS = "S3PutRequests"
