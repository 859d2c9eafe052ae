"""The shapes on the wire, defined once: the API validates requests with them, encodes its
answers from them and generates `/openapi.json` from them; the Python client decodes the
answers into them. msgspec and the standard library only (no web framework), so both the
API and the client import them.

- `base`: the common field types, request bodies' strictness, errors, health.
- `v1`: the native API's requests, queries and answers.
- `admin`: the admin calls' shapes (`/v1/admin`).
- `thesis`: the thesis's API (`/api`), with its wire names.
- `placement`: the placement controller's state (`placement/state`, `/v1/admin/placement`).

Field names are the wire names; `field` in an error names the path into these types.
"""
