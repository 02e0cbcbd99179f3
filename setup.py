"""Build step for the one C extension, ``kafkasim.records._codec`` (everything else is in pyproject.toml).

``kafkasim.records._codec`` is the C fast path of ``kafkasim/records/record_batch.py``; the
pure-Python path stays for the ``--py-files`` zip (zipimport cannot load a C extension),
for machines without a C compiler, and as the reference the tests compare it with. Set
``KAFKASIM_PURE_PYTHON=1`` to use it.

The extension is ``optional``: when it cannot be compiled (no compiler, no Python
headers) the install still succeeds, prints one line saying the pure-Python codec will
be used, and everything runs, only slower.
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that turns a failed compile of the optional extension into one line."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all: setuptools raises before build_extension
            self._skip(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._skip(exc)

    @staticmethod
    def _skip(exc):
        print(f"kafkasim: C codec not built ({type(exc).__name__}: {exc}); "
              "the pure-Python record codec will be used (same results, slower)")


setup(
    ext_modules=[Extension("kafkasim.records._codec", ["kafkasim/records/_codec.c"],
                           extra_compile_args=["-O2", "-std=c11"], optional=True)],
    cmdclass={"build_ext": OptionalBuildExt},
)
