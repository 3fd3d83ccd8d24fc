"""Shared fixtures: the real offline data mirror (../shared/data) and a temporary results root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    env = os.environ.get("BONBENCH_DATA_DIR")
    if env:
        return Path(env)
    return REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real benchmark mirror. Tests on real data fail loudly if it is missing."""
    path = _shared_data()
    assert path.is_dir(), f"offline data mirror not found at {path}; set BONBENCH_DATA_DIR"
    return path
