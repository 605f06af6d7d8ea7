"""A stateful fake Kubernetes API served over HTTP on loopback, reached through the real client."""
