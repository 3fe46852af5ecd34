"""hanganalyze: tell people why their ML process hangs or crashed."""

__version__ = "0.1.0"
