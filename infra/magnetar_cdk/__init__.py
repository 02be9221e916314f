"""The parts of MagnetarStack (infra/magnetar_stack.py), one module per responsibility.

Every function here takes the stack as its scope and returns what it creates: no module adds a
construct level, so each resource keeps the logical id it has always had (a new level would rename,
and so replace, the table and the bucket on the next deploy). tests/infra/test_stack_layout.py
checks that the template's logical ids and resource types stay those of the snapshot.

- settings: paths, runtime, pinned logical ids, defaults and their resolution from the context
- storage: metadata table, segment bucket, journal stream, token key secret
- functions: core layer, execution roles, the function factory, grants, bootstrap items
- apis: HTTP APIs and their authorizers, WebSocket API and routes, CloudFront in front of it
- observability: log groups, access logs, API Gateway's logging role, alarms
- nag: cdk-nag acknowledgements
"""
