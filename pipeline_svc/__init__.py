"""One-hop pipelines: a client-facing API served as render -> generate -> derender over the three services.

Holds no model and imports no service package: it calls render_svc, engine_svc and derender_svc through
their gRPC contract (directly or through the gateway), so it scales on its own like the others.
"""
