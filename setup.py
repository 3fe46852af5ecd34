"""The one build step pyproject.toml cannot say: the repository's ``signatures/`` folder (one copy,
read in place by a source checkout and the tests) goes into the wheel as package data of
``hanganalyze`` (``hanganalyze/signatures/``), so every install scheme -- ``pip install``,
``--user``, ``--target``, a venv, pipx, ``uv tool``, a zipapp -- has it beside the code, where
``hanganalyze/datapaths.py`` finds it.  Data files under ``<prefix>/share`` exist only for some
schemes (issue 35).  Everything else is declared in pyproject.toml."""

import os

from setuptools import setup
from setuptools.command.build_py import build_py

#: The data folder in the repository and its place inside the ``hanganalyze`` package.
DATA_SOURCE = "signatures"
DATA_PACKAGE_DIR = os.path.join("hanganalyze", "signatures")


def data_files(root: str):
    """Every file under ``root`` (relative paths), whatever its name: a YAML file another change
    adds under ``signatures/`` ships without an edit here.  Dot files and caches are left out."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        out += [os.path.relpath(os.path.join(folder, f), root) for f in sorted(files) if not f.startswith(".")]
    return out


class BuildPyWithData(build_py):
    """build_py, plus ``signatures/`` copied to ``hanganalyze/signatures/`` in the build folder.
    An editable install reads the checkout's folder in place (datapaths.py), so it copies nothing."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or not os.path.isdir(DATA_SOURCE):
            return
        for rel in data_files(DATA_SOURCE):
            target = os.path.join(self.build_lib, DATA_PACKAGE_DIR, rel)
            self.mkpath(os.path.dirname(target))
            self.copy_file(os.path.join(DATA_SOURCE, rel), target, preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True):
        if getattr(self, "editable_mode", False):
            return super().get_outputs(include_bytecode)
        extra = [os.path.join(self.build_lib, DATA_PACKAGE_DIR, rel) for rel in data_files(DATA_SOURCE)]
        return super().get_outputs(include_bytecode) + extra


setup(cmdclass={"build_py": BuildPyWithData})
