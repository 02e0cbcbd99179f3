"""Run import-linter's contracts (pyproject.toml) over the one ``kafkasim`` package.

Why a wrapper: the user's top-level folders (``broker/``, ``storage/``, ...) are mapped
into ``kafkasim.*`` by setuptools' ``package-dir``. Installed, they sit inside
``kafkasim/``; in an editable install they stay where they are, and import-linter
(grimp) discovers modules by walking the root package's folder, so it would see only
``kafkasim/``. This script lays the source out as it is installed (a throw-away copy
in a temporary directory, built from the same ``package-dir`` table), then runs
``lint-imports`` there. Exit status is lint-imports' own.

Usage: ``python scripts/lint_imports.py`` (``make test`` runs it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def package_dirs(root: str = ROOT) -> dict[str, str]:
    """``{"kafkasim.storage": "storage", ...}`` from pyproject.toml's package-dir table."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["tool"]["setuptools"]["package-dir"]


def stage(dest: str, root: str = ROOT) -> str:
    """Copy the ``.py`` files into ``dest`` laid out as installed; return ``dest``."""
    for package, folder in package_dirs(root).items():
        src = os.path.join(root, folder)
        target = os.path.join(dest, *package.split("."))
        for dirpath, dirnames, filenames in os.walk(src):
            rel = os.path.relpath(dirpath, src)
            # the kafkasim/ folder's own subfolders are packages of their own, except the ones
            # package-dir maps elsewhere (none of those live inside kafkasim/ in the source)
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            out = os.path.normpath(os.path.join(target, rel))
            os.makedirs(out, exist_ok=True)
            for name in filenames:
                if name.endswith(".py"):
                    shutil.copyfile(os.path.join(dirpath, name), os.path.join(out, name))
    return dest


def run(staged: str, root: str = ROOT) -> subprocess.CompletedProcess:
    """Run lint-imports with ``staged`` as the import root; capture its output."""
    exe = os.path.join(os.path.dirname(sys.executable), "lint-imports")
    env = dict(os.environ, PYTHONPATH=staged)
    return subprocess.run([exe, os.path.join(root, "pyproject.toml"), "--no-cache"],
                          cwd=staged, env=env, capture_output=True, text=True)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="kafkasim-lint-") as tmp:
        result = run(stage(tmp))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
