"""Cost models: serverless bills and instance price-performance, from dated data files.

Prices and measurements are data (`prices/*.toml`, `measurements/*.toml`), never constants in
the logic; the functions here are pure.
"""
