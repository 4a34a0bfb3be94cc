"""``python -m medmnistc_fast ...``: the ``medmnistc-fast`` command (:func:`medmnistc_fast.cli.main`)."""
import sys

from .cli import main

if __name__ == "__main__":  # not when pool workers import the main module
    sys.exit(main())
