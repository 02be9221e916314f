"""Authentication: Pulsar's JWT tokens (HS256/RS256) and AWS IAM principals.

Authorization (who may do what) is the core's (`magnetar.core.authz`); this package only says
who a caller is.
"""
