"""PLACEHOLDER (owned by the end-to-end work): read an ELF core's notes with pyelftools."""

from __future__ import annotations


def read_core(path):
    return None
