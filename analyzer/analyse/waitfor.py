"""PLACEHOLDER (owned by the wait-for work): wait-for graphs and deadlock cycles."""

from __future__ import annotations


def annotate_waitgraphs(snapshot):
    return None


def cycle_findings(snapshot):
    return []
