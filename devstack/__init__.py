"""The local dev stack: every service and Envoy on loopback (`scaleout-stack`, and the tests' fixtures)."""
