"""PLACEHOLDER (owned by the reports work): stable bucket id."""

from __future__ import annotations


def bucket_id(snapshot):
    return None
