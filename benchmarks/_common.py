"""Pieces shared by the benchmark scripts (run as ``python benchmarks/NAME.py``)."""
import argparse
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def add_reference_arg(ap: argparse.ArgumentParser) -> None:
    """``--reference-python``: the python of a venv with medmnistc 0.1.0 (optional; default the
    environment variable ``MEDMNISTC_REFERENCE_PYTHON``)."""
    ap.add_argument("--reference-python", default=os.environ.get("MEDMNISTC_REFERENCE_PYTHON"),
                    help="python of a venv with medmnistc 0.1.0 (the reference is skipped if "
                         "not given)")


def ratio_summary(ratios) -> str:
    """``"median 7.7x, min 0.7x, max 180.3x"`` for a non-empty sequence of speed-ups."""
    return (f"median {statistics.median(ratios):.1f}x, min {min(ratios):.1f}x, "
            f"max {max(ratios):.1f}x")


def git_commit() -> str:
    """The short commit hash of the checkout, or "unknown"."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
