"""`magnetar verify`: randomized workloads under injected crashes, checked Jepsen-style."""
