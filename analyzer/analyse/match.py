"""PLACEHOLDER (owned by the signatures work): match a Snapshot against the signature DB."""

from __future__ import annotations


def match_snapshot(snapshot, db):
    return []
