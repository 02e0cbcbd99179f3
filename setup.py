"""Build step for the one C extension, ``storage._codec`` (everything else is in pyproject.toml).

``storage._codec`` is the C fast path of ``storage/record_batch.py``; the pure-Python path
stays for the ``--py-files`` zip (zipimport cannot load a C extension) and as the
reference the tests compare it with. Set ``KAFKASIM_PURE_PYTHON=1`` to use it.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("storage._codec", ["storage/_codec.c"], extra_compile_args=["-O2", "-std=c11"])])
