"""Build script: the private C++ extension ``medmnistc_fast._native`` from ``csrc/``.

All metadata lives in pyproject.toml; this file only declares the extension, following
pybind11's setuptools pattern (``Pybind11Extension``).
"""
from glob import glob

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

ext_modules = [
    Pybind11Extension(
        "medmnistc_fast._native",
        sorted(glob("csrc/*.cpp")),
        include_dirs=["csrc"],
        cxx_std=17,
        # No FMA contraction: the bit-exact kernels must round the same on every target.
        extra_compile_args=["-O3", "-fno-math-errno", "-ffp-contract=off"],
    ),
]

setup(ext_modules=ext_modules, cmdclass={"build_ext": build_ext})
