"""The ASGI application: native API (/v1), the thesis-compatible API (/api), metrics, docs."""
