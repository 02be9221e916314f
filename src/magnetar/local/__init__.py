"""The local runtime: emulates the AWS pieces moto cannot (Lambda, API Gateway, event sources).

It holds no business logic: it turns HTTP requests into API Gateway events, Kinesis records
into event-source-mapping batches, and invokes the same handlers that `cdk deploy` ships.
"""
