"""`magnetar perf`: throughput, latency and AWS cost, measured next to the emulator's own limit
(modeled on Pulsar's `pulsar-perf`)."""
