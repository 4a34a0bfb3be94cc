"""Training-time augmentation throughput through a torch DataLoader: ours vs the reference.

Method: the same real images (``medmnistc_fast.sample.sample_images``, written once to a
temporary ``.npz``) as PIL images in a map-style dataset whose ``__getitem__`` returns
``(np.asarray(augment(image)), 0)``; a ``DataLoader`` (batch size 128, the MedMNIST v2 training
recipe; images and labels through the default collate, the harness's own per-image records kept
as Python lists; ``persistent_workers`` when workers > 0, forked workers) with 0 and 2 workers,
at 28 and 224 px,
for an RGB-heavy (pathmnist), an RGB-wide (dermamnist) and a gray (chestmnist) dataset.
Ours is ``medmnistc_fast.augment.AugMedMNISTC(flag, seed=0).warm_up()``, the reference
``medmnistc.augmentation.AugMedMNISTC(CORRUPTIONS_DS[flag])`` (medmnistc 0.1.0, in its own
venv, with glibc's malloc keeping freed memory: ``_common.REFERENCE_MALLOC``). Transform
construction (ours: ``warm_up``, which loads the kernels and builds the noise
tables before the workers fork) plus one epoch are the warm-up, reported apart; then REPEATS
epochs are timed and a run's rate is the median images per second over them. Each
(side, configuration) runs in its own subprocess, the sides alternating, and the whole
alternation is repeated ROUNDS times (default 3) so that drifts in machine load (on a shared
VM the same run can differ by a third from one minute to the next) hit both sides alike: the
speed-up is the median over rounds of the round's ours / reference rate ratio, and the table
also gives each side's median rate over rounds and the spread of all its epochs. One thread
per process for every library (OMP/MKL/OpenBLAS/MagickWand thread limits 1,
``torch.set_num_threads(1)``, ``cv2.setNumThreads(1)``, ``medmnistc_fast.set_num_threads(1)``).
Where the reference raises (stain_deposit and characters at 28 px: empty random ranges) or
returns a wrong shape, the harness counts it and returns the input unchanged (which flatters
the reference's rate); the rates are reported. A third run per configuration passes the images
through unchanged (a transform returning its input, in our venv): the pipeline's own ceiling,
which bounds the speed-up any transform can show (at 224 px gray with two workers, collation
and the worker-to-parent transfer alone allowed 6.6-8.3 times the reference's rate at batch
128 over the stored runs, and 4-5 times at batch 32 with the harness's records sent as two extra
tensors). A last probe (``shm_probe``) times what a worker pays per batch for that transfer:
stacking the batch into new shared memory (fresh pages every batch) against ordinary, reused
memory.

Usage::

    python benchmarks/bench_augment.py --reference-python /path/to/REF/bin/python

Writes ``benchmarks/results_augment.json`` and ``benchmarks/RESULTS_augment.md`` (``--json``,
``--md``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from _common import (add_output_args, add_reference_arg, cpu_description, git_commit,
                     ratio_summary, reference_env, render_only, write_results)

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MAGICK_THREAD_LIMIT",
             "MEDMNISTC_FAST_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
DATASETS = ("pathmnist", "dermamnist", "chestmnist")
SIZES = (28, 224)
WORKERS = (0, 2)
#: Images per batch: MedMNIST v2's training recipe (Yang et al., Scientific Data 10:41, 2023,
#: "Adam ... batch size of 128").
BATCH = 128


# ---------------------------------------------------------------------------------------------
# Side: runs in the venv of one implementation (no medmnistc_fast import at module level)
# ---------------------------------------------------------------------------------------------

def _identity(img):
    return img


def _make_transform(impl: str, flag: str):
    if impl == "none":  # the DataLoader pipeline alone: its ceiling for any transform
        return _identity
    if impl == "ours":
        import medmnistc_fast as mf
        from medmnistc_fast.augment import AugMedMNISTC

        mf.set_num_threads(1)
        return AugMedMNISTC(flag, seed=0).warm_up()  # before the workers fork
    import numpy

    numpy.fromstring = lambda b, dtype=float, **k: numpy.frombuffer(b, dtype)
    import cv2
    from medmnistc.augmentation import AugMedMNISTC
    from medmnistc.corruptions.registry import CORRUPTIONS_DS

    cv2.setNumThreads(1)
    return AugMedMNISTC(CORRUPTIONS_DS[flag])


class _AugDataset:
    """PIL images through a transform; returns (uint8 array, label 0, failed flag, CPU s)."""

    def __init__(self, images, transform, catch: bool):
        from PIL import Image

        self.images = [Image.fromarray(x) for x in images]
        self.transform = transform
        self.catch = catch

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        import numpy as np

        img = self.images[i]
        t0 = time.thread_time()
        if not self.catch:
            out = np.asarray(self.transform(img))
            return out, 0, 0, time.thread_time() - t0
        try:
            out = self.transform(img)
            failed = 0
        except Exception:  # the reference's crashes at small sizes, counted
            out, failed = img, 1
        out = np.asarray(out)
        cpu = time.thread_time() - t0
        if out.shape != np.asarray(img).shape:  # the reference's wrong-shape outputs, counted
            out, failed = np.asarray(img), 1
        return out, 0, failed, cpu


def _collate(batch):
    """(images, labels) as a training loader collates them; the harness's per-image records
    (failure flag, CPU seconds) as plain lists, so that they add no tensors to the transfer."""
    from torch.utils.data import default_collate

    return (default_collate([(b[0], b[1]) for b in batch]), [b[2] for b in batch],
            [b[3] for b in batch])


def run_side(impl: str, src: str, dst: str, repeats: int, configs) -> None:
    import warnings

    import numpy as np
    import torch
    from torch.utils.data import DataLoader

    # Both sides hand read-only arrays (np.asarray of PIL images) to the default collate.
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    torch.set_num_threads(1)
    data = np.load(src)
    results = {}
    for config in configs:
        flag, size, workers = config.split("/")
        size, workers = int(size), int(workers)
        images = data[f"{'gray' if flag == 'chestmnist' else 'rgb'}{size}"]
        torch.manual_seed(0)
        t_setup = time.perf_counter()
        ds = _AugDataset(images, _make_transform(impl, flag), catch=impl == "reference")
        loader = DataLoader(ds, batch_size=BATCH, num_workers=workers,
                            persistent_workers=workers > 0, collate_fn=_collate)
        setup = time.perf_counter() - t_setup
        epochs, fails, cpu = [], 0, []
        for e in range(repeats + 1):
            t0 = time.perf_counter()
            for _xy, failed, cpu_s in loader:
                fails += sum(failed)
                if e:
                    cpu.extend(cpu_s)
            epochs.append(time.perf_counter() - t0)
        epochs[0] += setup  # transform construction (ours: warm_up) counts as warm-up
        del loader
        rates = [len(images) / t for t in epochs[1:]]
        results[config] = {"n_images": int(len(images)), "warmup_epoch_s": epochs[0],
                           "images_per_s": rates, "failures": fails,
                           "transform_cpu_ms": 1e3 * float(np.mean(cpu)),
                           "failure_rate": fails / (len(images) * (repeats + 1))}
    import PIL

    versions = {"numpy": np.__version__, "torch": torch.__version__, "pillow": PIL.__version__,
                "python": platform.python_version()}
    if impl in ("ours", "none"):
        import medmnistc_fast as mf

        versions["medmnistc_fast"] = mf.__version__
    else:
        from importlib.metadata import version

        versions["medmnistc"] = version("medmnistc")
    with open(dst, "w") as f:
        json.dump({"versions": versions, "results": results}, f)


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------



def shm_probe(repeats: int = 30) -> dict:
    """Cost of one batch's transfer buffer, as a DataLoader worker pays it: ``default_collate``
    in a worker stacks the batch into a new shared-memory storage (``_new_shared``), whose
    pages are fresh on every batch; in the main process (0 workers) it stacks into ordinary
    memory, which the allocator reuses. Median ms per batch of BATCH uint8 224 px images,
    gray and RGB, one thread."""
    import torch

    torch.set_num_threads(1)
    out = {}
    for kind, shape in (("gray", (224, 224)), ("rgb", (224, 224, 3))):
        items = [torch.zeros(shape, dtype=torch.uint8) for _ in range(BATCH)]
        numel = BATCH * items[0].numel()
        for where in ("shared", "private"):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                if where == "shared":
                    dst = items[0].new(items[0].untyped_storage()._new_shared(numel))
                    dst = dst.resize_(BATCH, *shape)
                else:
                    dst = torch.empty((BATCH, *shape), dtype=torch.uint8)
                torch.stack(items, out=dst)
                times.append(time.perf_counter() - t0)
                del dst
            out[f"{kind}/{where}"] = 1e3 * statistics.median(times)
    return out


def _spawn(python: str, impl: str, src: str, repeats: int, tmp: str, config: str) -> dict:
    dst = os.path.join(tmp, f"{impl}.json")
    subprocess.run([python, os.path.abspath(__file__), "--side", impl, "--src", src,
                    "--dst", dst, "--repeats", str(repeats), "--config", config], check=True,
                   env=reference_env() if impl == "reference" else None)
    with open(dst) as f:
        return json.load(f)


def markdown(result: dict) -> str:
    meta = result["meta"]
    lines = ["# Augmentation throughput through a DataLoader", "",
             f"Commit {meta['commit']}, {meta['date']}, {meta['machine']}. Ours: "
             f"{meta['ours_versions']}; reference: {meta.get('reference_versions') or 'not run'}.",
             f"{meta.get('rounds', 1)} rounds per configuration, each running ours, no "
             "transform and the reference one after the other in fresh processes. Images per "
             f"second: median over rounds of each run's median over {meta['repeats']} epochs "
             "after one warm-up epoch (spread: min-max of all epochs). Speed-up: median over "
             "rounds of the round's ours / reference ratio (the rounds' ratios in brackets). "
             f"{meta['n224']} images at 224 px, {meta['n28']} at 28 px; batch {BATCH}; one "
             "thread per process; PIL images in, uint8 arrays out; `AugMedMNISTC(flag)` over "
             "all the dataset's corruptions plus identity. Reference failures: calls that "
             "raised or returned a wrong shape (input returned instead).", "",
             "Transform CPU ms/img: mean thread CPU time of one transform call plus "
             "`np.asarray` inside `__getitem__` (insensitive to other load on the machine).",
             "No transform: the same DataLoader with a transform that returns the image, the "
             "ceiling of any transform's rate in this pipeline (collation, worker-to-parent "
             "transfer); ceiling / ref. is the largest speed-up any transform could show.",
             "",
             "| dataset | px | workers | ours img/s (spread) | reference img/s (spread) | "
             "speed-up | no transform img/s (ceiling / ref.) | "
             "transform CPU ms/img ours / ref. (ratio) | ref. failures | "
             "warm-up s ours / ref. |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for key, row in result["rows"].items():
        flag, size, workers = key.split("/")
        o = row["ours"]
        r = row.get("reference")
        ours = f"{o[0]:.0f} ({o[1]:.0f}-{o[2]:.0f})"
        nt = row.get("no_transform")
        ceiling = f"{nt[0]:.0f}" if nt else "-"
        if nt and r:
            ceiling += f" ({row['ceiling_speedup']:.1f}x)"
        if r:
            ref = f"{r[0]:.0f} ({r[1]:.0f}-{r[2]:.0f})"
            rounds = ", ".join(f"{a / b:.1f}" for a, b in zip(row["ours_round_rates"],
                                                             row["reference_round_rates"]))
            ratio = f"{row['speedup']:.1f}x ({rounds})"
            cpu = (f"{row['ours_cpu_ms']:.3f} / {row['reference_cpu_ms']:.3f} "
                   f"({row['cpu_speedup']:.1f}x)")
            fails = f"{100 * row['reference_failure_rate']:.1f} %"
            warm = f"{row['ours_warmup_s']:.2f} / {row['reference_warmup_s']:.2f}"
        else:
            ref = ratio = fails = "-"
            cpu = f"{row['ours_cpu_ms']:.3f} / -"
            warm = f"{row['ours_warmup_s']:.2f} / -"
        lines.append(f"| {flag} | {size} | {workers} | {ours} | {ref} | {ratio} | {ceiling} | "
                     f"{cpu} | {fails} | {warm} |")
    for field, label in (("speedup", "DataLoader images/s"),
                         ("cpu_speedup", "transform CPU time")):
        by_size = {}
        for key, row in result["rows"].items():
            if field in row:
                by_size.setdefault(key.split("/")[1], []).append(row[field])
        if by_size:
            lines.append("")
            for size, ratios in sorted(by_size.items(), key=lambda kv: int(kv[0])):
                lines.append(f"- {label}, {size} px: speed-up {ratio_summary(ratios)}.")
    shm = result.get("shm_ms_per_batch")
    if shm:
        lines += ["", "Why the loader caps the speed-up with workers: a worker's default collate "
                  "stacks each batch into new shared memory, whose pages are fresh every time; "
                  f"with 0 workers the batch goes to reused memory. Per batch of {BATCH} 224 px "
                  "images (`shm_probe`, median, one thread):"]
        for kind in ("gray", "rgb"):
            sh, pr = shm[f"{kind}/shared"], shm[f"{kind}/private"]
            lines.append(f"- {kind}: shared {sh:.2f} ms ({1e3 * sh / BATCH:.1f} us per image), "
                         f"private {pr:.2f} ms ({1e3 * pr / BATCH:.1f} us per image).")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_reference_arg(ap)
    ap.add_argument("--repeats", type=int, default=3, help="timed epochs per run")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternations of the sides per configuration")
    ap.add_argument("--n28", type=int, default=2048, help="images at 28 px")
    ap.add_argument("--n224", type=int, default=768, help="images at 224 px")
    add_output_args(ap, "augment")
    ap.add_argument("--side", choices=("ours", "reference", "none"), help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--dst", help=argparse.SUPPRESS)
    ap.add_argument("--config", action="append", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if render_only(args, markdown):
        return 0
    if args.side:
        run_side(args.side, args.src, args.dst, args.repeats, args.config)
        return 0

    import numpy as np

    from medmnistc_fast.sample import sample_images

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "images.npz")
        np.savez(src, **{f"{kind}{size}": sample_images(args.n28 if size == 28 else args.n224,
                                                          size, rgb=kind == "rgb")
                         for kind in ("rgb", "gray") for size in SIZES})
        # One subprocess per (side, configuration, round), the sides alternating, so that
        # drifts in machine load hit both alike.
        runs = {"ours": {}, "none": {}, "reference": {}}
        versions = {}
        sides = [("ours", sys.executable), ("none", sys.executable)]
        if args.reference_python:
            sides.append(("reference", args.reference_python))
        for config in (f"{d}/{s}/{w}" for d in DATASETS for s in SIZES for w in WORKERS):
            for _ in range(args.rounds):
                for side, python in sides:
                    r = _spawn(python, side, src, args.repeats, tmp, config)
                    versions[side] = r["versions"]
                    runs[side].setdefault(config, []).append(r["results"][config])
            print(config, "done", flush=True)
    rows = {}
    for key, o_runs in runs["ours"].items():
        row = {"n_images": o_runs[0]["n_images"], "rounds": len(o_runs)}
        for side, label in (("ours", "ours"), ("none", "no_transform"), ("reference", "reference")):
            side_runs = runs[side].get(key)
            if not side_runs:
                continue
            medians = [statistics.median(r["images_per_s"]) for r in side_runs]
            epochs = [x for r in side_runs for x in r["images_per_s"]]
            row[label] = [statistics.median(medians), min(epochs), max(epochs)]
            row[f"{label}_round_rates"] = medians
            row[f"{label}_warmup_s"] = statistics.median(r["warmup_epoch_s"] for r in side_runs)
            row[f"{label}_cpu_ms"] = statistics.median(r["transform_cpu_ms"] for r in side_runs)
        if "reference" in row:
            r_runs = runs["reference"][key]
            row["reference_failure_rate"] = max(r["failure_rate"] for r in r_runs)
            row["speedup"] = statistics.median(
                o / r for o, r in zip(row["ours_round_rates"], row["reference_round_rates"]))
            row["ceiling_speedup"] = statistics.median(
                n / r for n, r in zip(row["no_transform_round_rates"],
                                      row["reference_round_rates"]))
            row["cpu_speedup"] = row["reference_cpu_ms"] / row["ours_cpu_ms"]
        rows[key] = row
    import medmnistc_fast as mf

    result = {"meta": {"commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                       "machine": f"{platform.machine()} {os.cpu_count()} cores, "
                                  f"{cpu_description()}, Python {platform.python_version()}",
                       "version": mf.__version__, "repeats": args.repeats,
                       "rounds": args.rounds, "batch": BATCH,
                       "n28": args.n28, "n224": args.n224,
                       "ours_versions": versions["ours"],
                       "reference_versions": versions.get("reference")},
              "rows": rows, "shm_ms_per_batch": shm_probe()}
    write_results(args, result, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
