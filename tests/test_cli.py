import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"


def tilegraph(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SRC), TILEGRAPH_CACHE_DIR=str(tmp_path),
               COLUMNS="160")
    return subprocess.run([sys.executable, "-m", "tilegraph", *args], capture_output=True,
                          text=True, env=env, timeout=600)


def test_check_passes_and_prints_table(tmp_path):
    result = tilegraph("check", tmp_path=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for kernel in ("add", "gelu tanh", "gelu erf", "softmax", "rms_norm", "linear matvec",
                   "linear tiled", "matmul+gelu"):
        assert kernel in result.stdout
    assert "24 passed, 0 failed" in result.stdout
    assert "FAIL" not in result.stdout


def test_info_names_versions(tmp_path):
    result = tilegraph("info", tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "torch" in result.stdout and "triton" in result.stdout


@pytest.mark.parametrize("args", [[], ["nonsense"], ["check", "--seed", "x"]])
def test_bad_arguments_exit_2_without_traceback(args, tmp_path):
    result = tilegraph(*args, tmp_path=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "usage: tilegraph" in result.stderr
