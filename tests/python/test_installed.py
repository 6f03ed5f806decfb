"""Which qjoule the Python tests import: under CI the one `pip install .` put into a fresh virtual
environment (scripts/python-venv.sh, QJOULE_TEST_PYTHON), never the build folder on PYTHONPATH."""

import os
import sys

import pytest

import qjoule


def test_the_package_under_test_is_the_installed_one_when_ci_says_so():
    if not os.environ.get("QJOULE_TEST_PYTHON"):
        pytest.skip("QJOULE_TEST_PYTHON unset: the tests import this build's package from PYTHONPATH")
    assert "PYTHONPATH" not in os.environ
    assert qjoule.__file__.startswith(os.path.join(sys.prefix, "lib")), qjoule.__file__
    assert qjoule._native.__file__.startswith(os.path.join(sys.prefix, "lib")), qjoule._native.__file__
    assert isinstance(qjoule.sensors()["absent"], list)
