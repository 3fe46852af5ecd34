"""PLACEHOLDER (owned by the text-parsing work): parse pasted text into a Snapshot."""

from __future__ import annotations

from hanganalyze.errors import InputError


def parse_text(text, input_format=None):
    raise InputError("text input is not supported yet")
