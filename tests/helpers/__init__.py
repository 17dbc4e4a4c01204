"""Shared test helpers (a package, so tests import them instead of each other or conftest).

``helpers.runs`` builds synthetic run directories through the real writer.
"""
