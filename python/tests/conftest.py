"""Shared fixtures of the Python package's tests: the data folders, the `mbsp` command, and a
hang detector (a test that runs for over two minutes dumps every thread's stack and exits)."""

import faulthandler
import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
# The shared data: MBSP_DATA_DIR if set (CI sets it), else ../shared/data next to the
# repository (as the Rust tests look for it).
DATA = pathlib.Path(os.environ.get("MBSP_DATA_DIR") or REPO.parent / "shared" / "data")
MATRICES = DATA / "matrices"
TOPOLOGIES = DATA / "topologies"

# How long one test may take before it is called hung.
HANG_SECONDS = 120


@pytest.fixture(autouse=True)
def hang_detector():
    faulthandler.dump_traceback_later(HANG_SECONDS, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def matrices() -> pathlib.Path:
    if not MATRICES.is_dir():
        pytest.fail(f"the shared matrices are not at {MATRICES} (set MBSP_DATA_DIR)")
    return MATRICES


@pytest.fixture(scope="session")
def topologies() -> pathlib.Path:
    if not TOPOLOGIES.is_dir():
        pytest.fail(f"the shared topologies are not at {TOPOLOGIES} (set MBSP_DATA_DIR)")
    return TOPOLOGIES


@pytest.fixture(scope="session")
def mbsp_command() -> str:
    """The `mbsp` command of the workspace build (MBSP_BIN, else target/debug/mbsp)."""
    path = os.environ.get("MBSP_BIN", str(REPO / "target" / "debug" / "mbsp"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"the mbsp command is not at {path}: build the workspace or set MBSP_BIN")
    return path
