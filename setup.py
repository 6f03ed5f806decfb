"""The CMake step of `pip install .` (pyproject.toml holds the package's metadata).

The native module qjoule._native is the CMake target qjoule_python_native (src/python): this file
configures a build folder, builds that one target and copies the module into the wheel (or, for
`pip install -e .`, beside python/qjoule/*.py). Variables:
  QJOULE_CMAKE_BUILD_DIR  the CMake build folder (default build/pip); an existing configured build,
                          e.g. build/release, is reused as it is (CI: no second compile)
  QJOULE_CMAKE_ARGS       extra configure arguments for a new folder, e.g. "-DQJOULE_CUDA=AUTO"
                          (default: the CPU build, -DQJOULE_CUDA=OFF: the module loads no GPU library
                          either way, and the CUDA kernels take long to compile)
The module is built for the interpreter running pip (Python3_EXECUTABLE), whose headers and pybind11
(Debian's python3-dev, pybind11-dev) scripts/install-deps.sh installs.
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent

try:  # pip builds a wheel with the `wheel` package; --no-build-isolation takes it from this environment
    import wheel  # noqa: F401
except ImportError:
    sys.exit(
        f"qjoule: {sys.executable} has no `wheel` package to build with (pip --no-build-isolation takes the "
        "environment's own); expected Debian's python3-wheel in a virtual environment made with "
        "`/usr/bin/python3 -m venv --system-site-packages`")


class CMakeExtension(Extension):
    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = Path(os.environ.get("QJOULE_CMAKE_BUILD_DIR") or ROOT / "build" / "pip")
        if not build_dir.is_absolute():
            build_dir = ROOT / build_dir
        if not (build_dir / "CMakeCache.txt").exists():
            args = ["-DCMAKE_BUILD_TYPE=Release", "-DQJOULE_BUILD_TESTS=OFF", "-DQJOULE_BUILD_BENCH=OFF",
                    "-DQJOULE_BUILD_PYTHON=ON", "-DQJOULE_CUDA=OFF", f"-DPython3_EXECUTABLE={sys.executable}"]
            args += shlex.split(os.environ.get("QJOULE_CMAKE_ARGS", ""))
            generator = ["-G", "Ninja"] if shutil.which("ninja") else []
            self._run(["cmake", "-S", str(ROOT), "-B", str(build_dir), *generator, *args])
        jobs = str(os.cpu_count() or 1)
        self._run(["cmake", "--build", str(build_dir), "--target", ext.target, "-j", jobs])
        built = sorted((build_dir / "python" / "qjoule").glob("_native*.so"))
        if not built:
            sys.exit(f"qjoule: the CMake build in {build_dir} left no python/qjoule/_native*.so; expected a build "
                     "configured with -DQJOULE_BUILD_PYTHON=ON")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[-1], dest)

    @staticmethod
    def _run(command):
        print("qjoule:", " ".join(command), flush=True)
        done = subprocess.run(command, check=False, cwd=ROOT)
        if done.returncode != 0:  # one line under CMake's own, not a Python traceback
            sys.exit(f"qjoule: `{' '.join(command)}` failed (exit {done.returncode}), its messages above; expected "
                     "a build folder that CMake configured from this source (QJOULE_CMAKE_BUILD_DIR) and the packages "
                     "of scripts/install-deps.sh --build")


setup(ext_modules=[CMakeExtension("qjoule._native", "qjoule_python_native")], cmdclass={"build_ext": CMakeBuild})
