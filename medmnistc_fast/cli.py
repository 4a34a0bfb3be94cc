"""The ``medmnistc-fast`` console command: ``generate``, ``preview`` and ``list`` (also
``python -m medmnistc_fast``).

Examples
--------
::

    medmnistc-fast generate --sample --dataset pathmnist --out medmnistc_sample
    medmnistc-fast generate --dataset all --root ~/.medmnist --size 224 --out medmnistc --workers 8
    medmnistc-fast generate --dataset tissuemnist --scheduler tcp://head:8786 \
        --format zarr --out /shared/mc
    medmnistc-fast generate --dataset pathology --from-folder patches/ --out pcam_c
    medmnistc-fast list --dataset pathology96
    medmnistc-fast preview --sample --dataset dermamnist --index 3 --out dermamnist.png
    medmnistc-fast list --dataset chestmnist --json

Exit status: 0 on success, 2 for bad arguments or inputs, a missing optional dependency,
Dask workers on other versions and failed reads or writes (OSError, e.g. a read-only --out;
one line on stderr, no traceback), 1 when memory ran out (one line too), 130 when
interrupted (Ctrl-C or SIGTERM); see :func:`main`. Only ``list`` exits 0 when its stdout is a
pipe closed by the reader (``| head``). Progress bars go to stderr; ``--quiet`` turns them off.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

__all__ = ["main"]

_PROG = "medmnistc-fast"


def _int_type(minimum: int, what: str, maximum: int | None = None):
    """An argparse type: an int >= ``minimum`` (and <= ``maximum`` when given), with a message
    naming ``what`` is expected."""
    def parse(text: str) -> int:
        from ._validation import parse_decimal

        v = parse_decimal(text)  # int() alone took "1_0" as 10 and "\u0663" as 3
        if v is None or v < minimum or (maximum is not None and v > maximum):
            raise argparse.ArgumentTypeError(f"expected {what}; got {text!r}")
        return v

    return parse


_positive_int = _int_type(1, "a positive integer")
_nonneg_int = _int_type(0, "an integer >= 0")


def _add_source(p: argparse.ArgumentParser, folder: bool = False) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--root", metavar="DIR", default=None,
                     help="folder of the MedMNIST+ files ({flag}.npz at 28 px, "
                          "{flag}_{size}.npz otherwise; default ~/.medmnist)")
    src.add_argument("--sample", action="store_true",
                     help="use the embedded sample (real images shipped in scikit-image and "
                          "pydicom) instead of MedMNIST+ files")
    if folder:
        src.add_argument("--from-folder", metavar="DIR", default=None,
                         help="read an image folder instead: one sub-folder per class "
                              "(DIR/CLASS/IMAGE.png|jpg|jpeg|tif|tiff; classes sorted by name, "
                              "label = class index; files sorted by name), all images of one "
                              "size and 8 bits per channel (16-bit and float images are "
                              "refused: convert them first); any dataset key, e.g. pathology96, pathology224 or "
                              "pathology (suite picked from the image size)")
    p.add_argument("--sample-n", type=_positive_int, default=None, metavar="N",
                   help="images per split of the sample (default 30); only with --sample")
    p.add_argument("--size", type=_positive_int, default=None,
                   help="image side in pixels (default 224): MedMNIST+ files come at 28, 64, "
                        "128 and 224; with --sample any side in 8..4096"
                        + ("; not used with --from-folder" if folder else ""))
    p.add_argument("--split", default="test", choices=("test", "val", "train"),
                   help="split to read (default test)")


def _build_parser() -> argparse.ArgumentParser:
    from ._version import __version__
    from .generate import MAX_WORKERS

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars or summary (generate), no summary (preview)")

    parser = argparse.ArgumentParser(
        prog=_PROG, description="Fast, reproducible MedMNIST-C and digital-pathology "
                                "corruptions.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    g = sub.add_parser(
        "generate", parents=[common],
        help="write corrupted sets ({out}/{flag}/{corruption}.npz)",
        description="Write one file per corruption: {out}/{flag}/{corruption}.npz with "
                    "{split}_images (kN, H, W[, 3]) uint8 and {split}_labels (kN, L), "
                    "severity-major (rows [j*N:(j+1)*N] = j-th selected severity, ascending), "
                    "plus {out}/{flag}/manifest.json (and filenames.json, row -> file, with "
                    "--from-folder). Splits other than test go to {out}/{flag}_{split}/. "
                    "Re-running resumes.")
    g.add_argument("--dataset", required=True, metavar="NAME",
                   help="a dataset flag, a comma-separated list, or 'all'; with --from-folder "
                        "one key: a dataset flag, pathology96, pathology224, or pathology "
                        "(96 px tables up to 160 px images, 224 px tables above)")
    _add_source(g, folder=True)
    g.add_argument("--out", required=True, metavar="DIR", help="output folder")
    g.add_argument("--corruptions", metavar="A,B", default=None,
                   help="comma-separated subset of corruptions (default: all of the dataset's)")
    g.add_argument("--severities", metavar="1,3", default=None,
                   help="comma-separated subset of levels 1..5 (default all five)")
    g.add_argument("--seed", type=_nonneg_int, default=0, help="random seed (default 0)")
    par = g.add_mutually_exclusive_group()
    par.add_argument("--workers", type=_int_type(1, f"an integer in 1..{MAX_WORKERS}",
                                                 MAX_WORKERS),
                     default=None, metavar="N",
                     help=f"worker processes on this machine, 1..{MAX_WORKERS}, each running "
                          f"one corruption thread (default: available CPUs; "
                          f"MEDMNISTC_FAST_NUM_THREADS does not apply)")
    par.add_argument("--scheduler", metavar="ADDRESS", default=None,
                     help="run on a Dask distributed cluster: scheduler address "
                          "(tcp://host:8786) or scheduler file (.json)")
    g.add_argument("--format", dest="fmt", choices=("npz", "zarr"), default="npz",
                   help="output container (default npz)")
    g.add_argument("--compress", action="store_true",
                   help="deflate npz members (zlib level 1, in the workers) / compress zarr "
                        "chunks; default: stored, the fastest")
    g.add_argument("--chunk-size", type=_positive_int, default=None, metavar="ROWS",
                   help="images per task and zarr chunk, at most 1 GiB of images (default: "
                        "about 8 MiB of images, 16..1024 rows)")
    g.add_argument("--overwrite", action="store_true",
                   help="replace outputs made with other parameters (their files that this "
                        "run does not regenerate stay on disk, no longer in manifest.json)")

    p = sub.add_parser(
        "preview", parents=[common],
        help="PNG grid of one image: corruptions x (clean + 5 severities)",
        description="Write a PNG grid: one row per corruption, columns clean and severities "
                    "1..5, for one image of a dataset.")
    p.add_argument("--dataset", required=True, metavar="NAME",
                   help="one dataset flag (the pathology suites have no MedMNIST+ files or "
                        "sample: preview them on your own image with "
                        "medmnistc_fast.generate.render_preview)")
    _add_source(p)
    p.add_argument("--index", type=_nonneg_int, default=0,
                   help="image index in the split (default 0)")
    p.add_argument("--corruptions", metavar="A,B", default=None,
                   help="comma-separated subset of corruptions, one row each (default: all of "
                        "the dataset's, in the reference's order)")
    p.add_argument("--seed", type=_nonneg_int, default=0,
                   help="random seed, as in generate (default 0); with --index, the cells equal "
                        "the rows of that image in a generate output of the same seed")
    p.add_argument("--out", required=True, metavar="FILE.png", help="PNG file to write")

    ls = sub.add_parser("list",
                        help="datasets and pathology suites, their corruptions and severity "
                             "tables",
                        description="Print every dataset and pathology suite (or one) with its "
                                    "corruptions and their five severity-table entries (units "
                                    "in medmnistc_fast/registry.py; pixel sizes at 224 px, or "
                                    "96 px for pathology96).")
    ls.add_argument("--dataset", metavar="NAME", default=None,
                    help="one dataset flag or pathology suite (omitted: every dataset and "
                         "suite)")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def _sample_n(args) -> int:
    """``--sample-n`` (default 30); a ValueError without ``--sample``, which alone reads it:
    ``--root DIR --sample-n 5`` processed every image of the file without a word."""
    if args.sample_n is None:
        from .sample import SPLIT_IMAGES

        return SPLIT_IMAGES
    if not args.sample:
        raise ValueError(f"--sample-n applies only to --sample (images per split of the "
                         f"embedded sample); got --sample-n {args.sample_n} without --sample")
    return args.sample_n


def _cmd_generate(args) -> int:
    from .generate import PATHOLOGY_AUTO, folder_suite, generate

    dataset = args.dataset
    if args.from_folder is not None and args.size is not None:
        raise ValueError("--size does not apply to --from-folder: the image size is read "
                         "from the images")
    if args.from_folder is not None and dataset == PATHOLOGY_AUTO:
        dataset, (h, w) = folder_suite(args.from_folder)
        if not args.quiet:
            print(f"{_PROG}: {h} x {w} px images: using the {dataset} suite "
                  f"(pathology96 up to 160 px, pathology224 above)", file=sys.stderr)
    results = generate(dataset, args.out, root=args.root, sample=args.sample,
                       folder=args.from_folder, sample_n=_sample_n(args), size=args.size,
                       split=args.split,
                       corruptions=args.corruptions, severities=args.severities,
                       seed=args.seed, workers=args.workers, scheduler=args.scheduler,
                       fmt=args.fmt, compress=args.compress, chunk_size=args.chunk_size,
                       overwrite=args.overwrite, progress=not args.quiet)
    if not args.quiet:
        for r in results:
            msg = f"{r['dataset']}: wrote {len(r['written'])} file(s)"
            if r["skipped"]:
                msg += f", {len(r['skipped'])} already complete"
            if r["removed_temps"]:
                msg += f", removed {len(r['removed_temps'])} leftover temporary file(s)"
            print(f"{msg} -> {r['dir']}", file=sys.stderr)
    return 0


def _cmd_preview(args) -> int:
    import os

    from .generate import load_images, render_preview

    from . import registry

    if not args.out.lower().endswith(".png"):
        raise ValueError(f"--out must name a .png file; got {args.out!r}")
    if args.dataset in registry.PATHOLOGY_SUITES:
        # generate's message points at --from-folder, which preview does not have
        raise ValueError(f"{args.dataset} has no MedMNIST+ files or sample to preview; draw "
                         f"the grid for your own image from Python: medmnistc_fast.generate."
                         f"render_preview(image, {args.dataset!r}).save('grid.png')")
    img = load_images(args.dataset, args.index, root=args.root, sample=args.sample,
                      sample_n=_sample_n(args), size=224 if args.size is None else args.size,
                      split=args.split)[0]
    grid = render_preview(img, args.dataset, seed=args.seed, index=args.index,
                          corruptions=args.corruptions)
    parent = os.path.dirname(os.path.abspath(args.out))
    tmp = os.path.join(parent, f".{os.path.basename(args.out)}.partial")
    try:
        if os.path.isdir(args.out):
            raise IsADirectoryError(21, "it is a folder")
        os.makedirs(parent, exist_ok=True)
        grid.save(tmp, format="PNG")
        os.replace(tmp, args.out)
    except OSError as exc:  # the OS's message would name the temporary file
        blocked = next((a for a in _ancestors(parent) if os.path.isfile(a)), None)
        why = f"{blocked!r} is a file, not a folder" if blocked else exc.strerror or exc
        raise type(exc)(exc.errno, f"cannot write --out {args.out!r}: {why}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    if not args.quiet:
        print(f"wrote {args.out} ({grid.width} x {grid.height} px)", file=sys.stderr)
    return 0


def _ancestors(path: str):
    """``path`` and its parent folders, innermost first."""
    import os

    while True:
        yield path
        up = os.path.dirname(path)
        if up == path:
            return
        path = up


def _cmd_list(args) -> int:
    from . import registry
    from ._validation import check_dataset
    from ._version import __version__
    from .generate import _jsonable

    names = tuple(registry.TABLES) if args.dataset is None else (check_dataset(args.dataset),)
    data = {}
    for d in names:
        data[d] = {
            "suite": "pathology" if d in registry.PATHOLOGY_SUITES else "medmnistc",
            "channels": 3 if registry.RGB[d] else 1,
            "task": registry.TASKS.get(d),
            "reference_size": registry.REFERENCE_SIZES[d],
            "corruptions": {c: {"fold": registry.fold_of(d, c), "table": _jsonable(t)}
                            for c, t in registry.TABLES[d].items()},
        }
    if args.json:
        json.dump({"version": __version__, "severities": [1, 2, 3, 4, 5], "datasets": data},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    for d, info in data.items():
        kind = "RGB" if info["channels"] == 3 else "gray"
        what = (f"pathology suite, tables for {info['reference_size']} px"
                if info["suite"] == "pathology" else info["task"])
        print(f"{d}  ({kind}, {what}, {len(info['corruptions'])} corruptions)")
        width = max(len(c) for c in info["corruptions"])
        for c, ci in info["corruptions"].items():
            levels = ", ".join(_fmt_level(v) for v in ci["table"])
            print(f"  {c:<{width}}  {ci['fold'] or '-':<13}  {levels}")
    return 0


def _fmt_level(v) -> str:
    if isinstance(v, list):
        if len(v) > 4:  # zoom factor lists
            return f"[{len(v)} zooms {v[0]:g}..{v[-1]:g}]"
        return "(" + ", ".join(f"{x:g}" for x in v) + ")"
    return f"{v:g}"


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _install_sigterm():
    """Make SIGTERM raise KeyboardInterrupt in the main thread (returns the old handler)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _raise_interrupt)


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so that the interpreter's final flush
    does not report the same error again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


#: Python parameter names of generate / render_preview and the flags that set them: an error
#: message starting "size must ..." is shown as "--size must ..." on the command line.
_FLAG_OF = {"size": "--size", "seed": "--seed", "severities": "--severities",
            "corruptions": "--corruptions", "split": "--split", "sample_n": "--sample-n",
            "folder": "--from-folder", "root": "--root", "out": "--out", "index": "--index",
            "lo": "--index",
            "chunk_size": "--chunk-size", "workers": "--workers", "dataset": "--dataset",
            "fmt": "--format", "scheduler": "--scheduler"}


def _print_error(exc: BaseException) -> None:
    """The one-line ``medmnistc-fast: error: ...`` message on stderr (dropped if stderr is
    itself a closed pipe: the exit status still tells); a leading parameter name is shown as
    its flag (:data:`_FLAG_OF`)."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
    name, sep, rest = msg.partition(" must ")
    if sep and name in _FLAG_OF:
        msg = f"{_FLAG_OF[name]} must {rest}"
    try:
        print(f"{_PROG}: error: {msg}", file=sys.stderr)
    except (OSError, ValueError):
        pass


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (e.g. a dataset skipped by ``generate``) as one ``medmnistc-fast: warning:``
    line on stderr, without Python's file and source-line context."""
    try:
        print(f"{_PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)
    except (OSError, ValueError):
        pass


def main(argv=None) -> int:
    """Run the console command; returns the exit status.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success (also for ``list`` into a pipe the reader closed); 2 on bad arguments
        or inputs (ValueError, argparse usage errors), a missing optional dependency
        (ImportError), Dask workers on other versions (``generate.DaskEnvironmentError``) and
        failed reads or writes (OSError, a broken pipe of ``generate`` or
        ``preview`` included), each with a one-line message on stderr; 1 when memory ran
        out (MemoryError, also with a one-line message); 130 when interrupted (Ctrl-C or
        SIGTERM).
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    handler = {"generate": _cmd_generate, "preview": _cmd_preview, "list": _cmd_list}
    # SIGTERM (kill, batch schedulers ending a job) takes the same path as Ctrl-C: worker
    # pools are shut down and temporary files removed instead of orphaning the workers.
    previous = _install_sigterm()
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            # the package's own notices are shown, whatever -W says about other warnings
            warnings.filterwarnings("default", category=UserWarning, module=r"medmnistc_fast\b")
            return handler[args.command](args)
    except KeyboardInterrupt:
        # Only generate resumes: its finished files are kept and skipped by the next run.
        advice = "; re-run the same command to resume" if args.command == "generate" else ""
        print(f"{_PROG}: interrupted{advice}", file=sys.stderr)
        return 130
    except BrokenPipeError as exc:
        if args.command == "list":  # `medmnistc-fast list | head`: the reader of stdout left
            _silence_stdout()
            return 0
        # generate and preview write nothing to stdout: a broken pipe there is a failure
        # (a worker pool's pipe, or stderr closed under the progress bars), never success.
        _print_error(exc)
        return 2
    except (ValueError, OSError, ImportError) as exc:
        _print_error(exc)
        return 2
    except RuntimeError as exc:
        from .generate import DaskEnvironmentError, WorkerDiedError  # imported if it raised

        if isinstance(exc, WorkerDiedError):
            _print_error(exc)
            return 1
        if not isinstance(exc, DaskEnvironmentError):
            raise
        _print_error(exc)
        return 2
    except MemoryError:
        # Files written so far are complete (atomic writes), so a re-run resumes.
        _print_error(MemoryError("out of memory; outputs written so far are complete: re-run "
                                 "with a smaller --chunk-size or fewer --workers to resume"))
        return 1
    finally:
        if previous is not None:
            import signal

            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
