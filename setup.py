"""Build the compiled kernels. Everything else lives in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

def kernel(module: str) -> Extension:
    """One compiled kernel: src/recordkit/<module path>.pyx, C++17, numpy headers."""
    return Extension(
        f"recordkit.{module}",
        [f"src/recordkit/{module.replace('.', '/')}.pyx"],
        include_dirs=[numpy.get_include()],
        language="c++",
        extra_compile_args=["-O3", "-std=c++17"],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )


extensions = [kernel("formats.ctf._kernel"), kernel("formats.cbf._kernel"), kernel("engine._randomize"),
              kernel("engine._gather"),
              kernel("formats.ofrecord._kernel"), kernel("formats.tfrecord._kernel"),
              kernel("formats._ranges"), kernel("images._kernel")]

setup(ext_modules=cythonize(extensions, language_level=3, compiler_directives={
    "boundscheck": False, "wraparound": False, "cdivision": True, "initializedcheck": False,
}))
