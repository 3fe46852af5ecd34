"""PLACEHOLDER (owned by the signatures work): load and validate signatures/*.yaml."""

from __future__ import annotations


class SignatureDB:
    def __init__(self, signatures=None):
        self.signatures = list(signatures or [])


def load_signatures(extra_dirs=()):
    return SignatureDB()
