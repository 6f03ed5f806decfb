"""`pip install .`'s CMake step (setup.py) on bad set-ups: one line saying what is wrong and what to do,
never a Python traceback."""

import os
import subprocess
import sys

SOURCE = os.environ.get("QJOULE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def run_setup(args, env=None, prelude="pass"):
    code = (f"import runpy, sys; {prelude}; sys.argv = ['setup.py'] + {args!r}; "
            "runpy.run_path('setup.py', run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], cwd=SOURCE, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_an_interpreter_without_wheel_is_one_line_naming_it():
    done = run_setup(["--version"], prelude="sys.modules['wheel'] = None")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        f"qjoule: {sys.executable} has no `wheel` package to build with")


def test_a_build_folder_cmake_cannot_build_is_one_line(tmp_path):
    build = tmp_path / "not-a-build"
    build.mkdir()
    (build / "CMakeCache.txt").write_text("")  # looks configured, is not
    done = run_setup(["build_ext", "--build-lib", str(tmp_path / "lib"), "--build-temp", str(tmp_path / "temp")],
                     env={"QJOULE_CMAKE_BUILD_DIR": str(build)})
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"qjoule: `cmake --build {build} --target qjoule_python_native")
    assert "expected a build folder that CMake configured from this source" in last
