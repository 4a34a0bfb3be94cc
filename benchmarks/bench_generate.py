"""End-to-end throughput and memory of ``medmnistc-fast generate`` beside the reference.

Method
------
- Inputs: real MedMNIST+-format ``{flag}_224.npz`` files written into a temporary folder,
  made by tiling 60 real images of :mod:`medmnistc_fast.sample` (scikit-image and pydicom
  sources) to N images; members are deflated, like MedMNIST's own files. The train and val
  splits hold 16 images each (only the test split is read; the whole file is checksummed).
- Ours: :func:`medmnistc_fast.generate.generate` (the function behind the console command) in a
  fresh Python process, all corruptions of the dataset, 5 levels, npz output (stored members),
  timed from the call to its return: checksum and unpacking of the input, process-pool start,
  corrupting, writing, fsync and rename of every file. Interpreter start-up and imports are
  excluded on both sides. ``--workers`` 1 (in-process) and 2 (processes).
- Reference: ``medmnistc`` 0.1.0's ``DatasetManager(...).create_dataset(flag)`` in its own venv
  (``--reference-python``), on the same files cut to ``--ref-n`` images (it is slow), timed around
  the call (it reads the file through the ``medmnist`` package and writes with
  ``np.savez_compressed``), one thread for every library, with glibc's malloc keeping freed memory
  (``_common.REFERENCE_MALLOC``, as in the corruption benchmark). Ours runs on that same small file
  too, once just before and once just after the reference; the speed-up uses the mean of the two.
- Memory: the process tree (parent, fork server, workers) is sampled every 0.1 s with psutil;
  reported are the peak of the summed RSS (it counts shared library pages once per process, so
  it overstates), the parent's peak and the largest worker's peak. The large-input run uses a
  20,000-image gray set and three corruptions (output deleted afterwards).
- Whole-benchmark estimate: each of the 12 datasets, ``--estimate-n`` images, one worker
  in-process after a warm-up (kernels loaded), gives seconds per output image; the estimate is
  the sum over datasets of (test N x 5 x corruptions) x that cost, divided by the measured
  2-worker speed-up of the matching kind (RGB or gray). Also reported: the lower bound set by
  the disk's write bandwidth for 398 GB of stored output.
- The machine is shared: load averages and CPU-seconds are recorded with every run, and images
  per CPU-second is given beside images per wall-second.

Usage::

    python benchmarks/bench_generate.py --reference-python /work/ref/REF/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import numpy as np

import medmnistc_fast as mf
from medmnistc_fast._npz import NpzWriter, deflate_segments
from medmnistc_fast.sample import N_LABELS, sample_images
from _common import (REFERENCE_MALLOC, add_output_args, add_reference_arg, cpu_description,
                     git_commit, reference_env, render_only, write_results)

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = 224
RGB_DS, GRAY_DS = "pathmnist", "tissuemnist"
#: Test-split sizes of MedMNIST+ (spec/medmnistc.md).
TEST_N = {"pathmnist": 7180, "bloodmnist": 3421, "dermamnist": 2005, "retinamnist": 400,
          "tissuemnist": 47280, "octmnist": 1000, "breastmnist": 156, "chestmnist": 22433,
          "pneumoniamnist": 624, "organamnist": 17778, "organcmnist": 8216, "organsmnist": 8827}
MEMORY_CORRUPTIONS = "jpeg_compression,impulse_noise,gaussian_blur"


# ------------------------------------------------------------------------------------- helpers


def make_input(path: str, dataset: str, n: int, unique: int = 60) -> None:
    """Write a MedMNIST+-format file of ``n`` test images (deflated members), streaming."""
    rgb = mf.registry.RGB[dataset]
    base = sample_images(min(unique, n), SIZE, rgb)
    with open(path, "wb") as f:
        w = NpzWriter(f)
        for split, m in (("train", 16), ("val", 16), ("test", n)):
            labels = (np.arange(m)[:, None] % 5 + np.zeros((1, N_LABELS[dataset]), int))
            w.begin_member(f"{split}_images", (m,) + base.shape[1:], np.uint8, True)
            for lo in range(0, m, len(base)):
                ch = base[: min(len(base), m - lo)]
                w.write_chunk(deflate_segments(ch), zlib.crc32(ch), ch.nbytes)
            w.end_member()
            w.add_array(f"{split}_labels", labels.astype(np.uint8), True)
        w.close()


class TreeMonitor:
    """Samples RSS and CPU time of a process and all its descendants."""

    def __init__(self, pid: int, interval: float = 0.1):
        import psutil

        self._psutil = psutil
        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak_total = self.peak_parent = self.peak_child = 0
        self.cpu = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        ps = self._psutil
        while not self._stop.is_set():
            try:
                procs = [self.root] + self.root.children(recursive=True)
            except ps.Error:
                break
            total = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    t = p.cpu_times()
                except ps.Error:
                    continue
                total += rss
                self.cpu[p.pid] = t.user + t.system
                if p.pid == self.root.pid:
                    self.peak_parent = max(self.peak_parent, rss)
                else:
                    self.peak_child = max(self.peak_child, rss)
            self.peak_total = max(self.peak_total, total)
            self._stop.wait(self.interval)

    def stop(self) -> dict:
        self._stop.set()
        self._t.join()
        mb = 1 / 2**20
        children = sum(v for k, v in self.cpu.items() if k != self.root.pid)
        return {"peak_rss_total_mb": round(self.peak_total * mb), "peak_rss_parent_mb":
                round(self.peak_parent * mb), "peak_rss_worker_mb": round(self.peak_child * mb),
                "cpu_children": children}


def _monitored(cmd: list, env=None) -> tuple:
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    mon = TreeMonitor(p.pid)
    out, err = p.communicate()
    mem = mon.stop()
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({p.returncode}):\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1]), mem


_OURS = r"""
import json, resource, sys, time
from medmnistc_fast.generate import generate
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
kw = json.loads(sys.argv[1])
c0, t = cpu(), time.perf_counter()
res = generate(**kw)
dt, c1 = time.perf_counter() - t, cpu()
n = sum(e["rows"] for r in res for e in r["manifest"]["files"].values())
print(json.dumps({"seconds": dt, "images": n, "cpu_self": c1 - c0}))
"""


def _row(res, mem, load0) -> dict:
    cpu = res["cpu_self"] + mem.pop("cpu_children")
    return dict(res, **mem, cpu_seconds=round(cpu, 2),
                images_per_s=res["images"] / res["seconds"],
                images_per_cpu_s=res["images"] / max(cpu, 1e-9),
                load_before=[round(x, 2) for x in load0],
                load_after=[round(x, 2) for x in os.getloadavg()])


def run_ours(dataset, root, out, workers, corruptions=None) -> dict:
    kw = {"dataset": dataset, "out": out, "root": root, "size": SIZE, "workers": workers,
          "corruptions": corruptions, "seed": 0}
    load0 = os.getloadavg()
    try:
        res, mem = _monitored([sys.executable, "-c", _OURS, json.dumps(kw)])
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return _row(res, mem, load0)


_REF = r"""
import json, os, sys, time
for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MAGICK_THREAD_LIMIT"):
    os.environ[v] = "1"
import numpy
numpy.fromstring = lambda b, dtype=float, **k: numpy.frombuffer(b, dtype)  # NumPy 2 removed it
import cv2, torch
cv2.setNumThreads(1); torch.set_num_threads(1)
from medmnistc.dataset_manager import DatasetManager
from medmnistc.corruptions.registry import CORRUPTIONS_DS
root, out, flag = sys.argv[1:4]
import resource
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
dm = DatasetManager(medmnist_path=root, output_path=out, random_seed=0)
c0, t = cpu(), time.perf_counter()
dm.create_dataset(flag)
dt, c1 = time.perf_counter() - t, cpu()
n = numpy.load(os.path.join(root, flag + "_224.npz"))["test_images"].shape[0]
print(json.dumps({"seconds": dt, "images": n * 5 * len(CORRUPTIONS_DS[flag]), "cpu_self": c1 - c0}))
"""


def run_reference(ref_python, dataset, root, out) -> dict:
    load0 = os.getloadavg()
    try:
        res, mem = _monitored([ref_python, "-c", _REF, root, out, dataset], env=reference_env())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return _row(res, mem, load0)


_ESTIMATE = r"""
import json, sys, time
import medmnistc_fast as mf
from medmnistc_fast.generate import generate
root, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
res = {}
for d in mf.DATASETS:
    generate(d, out + "/warm", root=root + "/warm", size=224, workers=1)   # load kernels
    t = time.perf_counter()
    generate(d, out + "/timed", root=root, size=224, workers=1)
    res[d] = (time.perf_counter() - t) / (n * 5 * len(mf.corruptions(d)))
    import shutil; shutil.rmtree(out, ignore_errors=True)
print(json.dumps(res))
"""


def _available_memory() -> int:
    import psutil

    return psutil.virtual_memory().available


def disk_write_mb_s(folder: str, mb: int = 1024) -> float:
    path = os.path.join(folder, "ddtest.bin")
    block = os.urandom(16 << 20)
    t = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(mb // 16):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    dt = time.perf_counter() - t
    os.remove(path)
    return mb * 2**20 / 1e6 / dt


# --------------------------------------------------------------------------------------- report
def markdown(r: dict) -> str:
    L = []
    L.append("## `medmnistc-fast generate`: end-to-end throughput and memory\n")
    L.append(f"{r['machine']}; medmnistc_fast {r['version']} (commit {r['commit']}); "
             f"disk write {r['disk_write_mb_s']:.0f} MB/s (1 GiB + fsync). Method: "
             "`benchmarks/bench_generate.py` docstring. The machine was shared with other jobs "
             "(load averages given); images/CPU-s does not depend on the load."
             + (" The reference ran with glibc malloc settings "
                + ", ".join(f"`{k}={v}`" for k, v in r["reference_env"].items())
                + " (its steady, faster state; see `_common.REFERENCE_MALLOC`)."
                if r.get("reference_env") else "") + "\n")
    L.append("| dataset (224 px) | input N | run | output to | images | seconds | images/s | "
             "images/CPU-s | peak RSS total / parent / worker (MB) | load avg |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for row in r["runs"]:
        L.append(f"| {row['dataset']} | {row['n']:,} | {row['label']} | "
                 f"{row.get('target', 'disk')} | "
                 f"{row['images']:,} | {row['seconds']:.1f} | {row['images_per_s']:,.0f} | "
                 f"{row['images_per_cpu_s']:,.0f} | {row['peak_rss_total_mb']} / "
                 f"{row['peak_rss_parent_mb']} / {row['peak_rss_worker_mb']} | "
                 f"{row['load_before'][0]:.1f} |")
    L.append("")
    if r.get("summary"):
        L.append("| dataset | ours (1 worker) vs reference, wall / CPU | 2 vs 1 workers, disk | "
                 "2 vs 1 workers, tmpfs | 2 vs 1 bound on an idle machine (from CPU-s) |")
        L.append("|---|---|---|---|---|")
        for d, sm in r["summary"].items():
            vs = (f"{sm['speedup_vs_reference']:.1f}x / {sm['cpu_speedup_vs_reference']:.1f}x"
                  if sm.get("speedup_vs_reference") else "n/a")
            def fx(k, sm=sm):
                return f"{sm[k]:.2f}x" if k in sm else "n/a"
            bound = fx("idle_bound_2_vs_1_tmpfs") if "idle_bound_2_vs_1_tmpfs" in sm \
                else fx("idle_bound_2_vs_1_disk")
            L.append(f"| {d} | {vs} | {fx('speedup_2_vs_1_disk')} | "
                     f"{fx('speedup_2_vs_1_tmpfs')} | {bound} |")
        L.append("")
    if r.get("estimate"):
        e = r["estimate"]
        L.append(f"Whole benchmark (12 datasets at 224 px, {e['images']:,} images, "
                 f"{e['gbytes']:.0f} GB stored): estimated **{e['hours_1_worker']:.2f} h with 1 "
                 f"worker, {e['hours_2_workers']:.2f} h with 2 workers** on this machine "
                 f"(compute), and at least {e['hours_disk_bound']:.2f} h for the disk to "
                 f"absorb the output at {r['disk_write_mb_s']:.0f} MB/s; expect the larger of the "
                 f"two, a little more when they are close. Per dataset, ms per "
                 f"output image with 1 worker (in-process, {r.get('estimate_n', 100)} images): "
                 + ", ".join(f"{d} {v * 1e3:.2f}" for d, v in e["seconds_per_image"].items())
                 + ".\n")
    return "\n".join(L) + "\n"


# ----------------------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_reference_arg(ap)
    ap.add_argument("--n-rgb", type=int, default=1000,
                    help=f"test images of the {RGB_DS} input for our 1- and 2-worker runs "
                         "(default 1000)")
    ap.add_argument("--n-gray", type=int, default=2000,
                    help=f"test images of the {GRAY_DS} input for our 1- and 2-worker runs "
                         "(default 2000)")
    ap.add_argument("--ref-n", type=int, default=200,
                    help="test images of the smaller inputs that the reference and ours both "
                         "run, for the speed-up (default 200)")
    ap.add_argument("--memory-n", type=int, default=20000,
                    help=f"test images of the {GRAY_DS} input of the peak-memory run "
                         "(default 20000)")
    ap.add_argument("--estimate-n", type=int, default=100,
                    help="test images per dataset for the whole-benchmark estimate "
                         "(default 100)")
    ap.add_argument("--skip-memory", action="store_true", help="skip the peak-memory run")
    ap.add_argument("--skip-estimate", action="store_true",
                    help="skip the whole-benchmark estimate")
    ap.add_argument("--tmpdir", default=None,
                    help="where inputs and outputs go, on a real disk (default: the system's "
                         "temporary folder)")
    ap.add_argument("--tmpfs", default="/dev/shm",
                    help="a RAM file system for the compute-bound runs ('' to skip; default "
                         "/dev/shm)")
    add_output_args(ap, "generate")
    args = ap.parse_args(argv)
    if render_only(args, markdown):
        return

    tmp = tempfile.mkdtemp(prefix="bench_generate_", dir=args.tmpdir)
    result = {"version": mf.__version__, "commit": git_commit(),
              "machine": f"{platform.machine()} {os.cpu_count()} cores, {cpu_description()}, Linux "
                         f"{platform.release()}, Python {platform.python_version()}, "
                         f"numpy {np.__version__}",
              "reference_env": REFERENCE_MALLOC if args.reference_python else None,
              "runs": [], "summary": {}}
    try:
        result["disk_write_mb_s"] = disk_write_mb_s(tmp)
        big, small = os.path.join(tmp, "in"), os.path.join(tmp, "in_ref")
        os.makedirs(big)
        os.makedirs(small)
        for d, n in ((RGB_DS, args.n_rgb), (GRAY_DS, args.n_gray)):
            print(f"building inputs for {d} ...", file=sys.stderr)
            make_input(os.path.join(big, f"{d}_224.npz"), d, n)
            make_input(os.path.join(small, f"{d}_224.npz"), d, args.ref_n)
        shm = args.tmpfs if args.tmpfs and os.path.isdir(args.tmpfs) else None
        for d, n in ((RGB_DS, args.n_rgb), (GRAY_DS, args.n_gray)):
            s = result["summary"].setdefault(d, {})
            if args.reference_python:
                # Ours runs just before and just after the reference and the two are averaged,
                # so that a drift of the (shared, virtual) machine's speed cancels to first order.
                before = run_ours(d, small, os.path.join(tmp, "o"), 1)
                print(f"reference on {d} ({args.ref_n} images) ...", file=sys.stderr)
                ref = run_reference(args.reference_python, d, small, os.path.join(tmp, "ref"))
                result["runs"].append(dict(ref, dataset=d, n=args.ref_n, target="disk",
                                           label="reference DatasetManager"))
                after = run_ours(d, small, os.path.join(tmp, "o"), 1)
                for when, ours in (("before", before), ("after", after)):
                    result["runs"].append(dict(ours, dataset=d, n=args.ref_n, target="disk",
                                               label=f"ours, 1 worker ({when} the reference)"))
                s["speedup_vs_reference"] = (before["images_per_s"] + after["images_per_s"]) / (
                    2 * ref["images_per_s"])
                s["cpu_speedup_vs_reference"] = (
                    before["images_per_cpu_s"] + after["images_per_cpu_s"]) / (
                    2 * ref["images_per_cpu_s"])
            out_bytes = n * 5 * len(mf.corruptions(d)) * SIZE * SIZE * (
                3 if mf.registry.RGB[d] else 1)
            targets = [("disk", os.path.join(tmp, "o"))]
            if shm and out_bytes < 0.4 * _available_memory():
                targets.append(("tmpfs", os.path.join(shm, f"bench_generate_{os.getpid()}")))
            for target, out in targets:
                rows = {}
                for w in (1, 2):
                    print(f"ours on {d} ({n} images), {w} worker(s), {target} ...",
                          file=sys.stderr)
                    row = run_ours(d, big, out, w)
                    result["runs"].append(dict(row, dataset=d, n=n, target=target,
                                               label=f"ours, {w} worker{'s' if w > 1 else ''}"))
                    rows[w] = row
                s[f"speedup_2_vs_1_{target}"] = (rows[2]["images_per_s"]
                                                 / rows[1]["images_per_s"])
                # On an idle machine 2 workers can at best use 2 cores fully:
                s[f"idle_bound_2_vs_1_{target}"] = min(2.0, 2 * rows[2]["images_per_cpu_s"]
                                                       / rows[1]["images_per_cpu_s"])
        for f in os.listdir(small):
            os.remove(os.path.join(small, f))
        for f in os.listdir(big):
            os.remove(os.path.join(big, f))

        if not args.skip_memory:
            print(f"memory run: {GRAY_DS}, {args.memory_n} images ...", file=sys.stderr)
            make_input(os.path.join(big, f"{GRAY_DS}_224.npz"), GRAY_DS, args.memory_n)
            row = run_ours(GRAY_DS, big, os.path.join(tmp, "o"), 2, MEMORY_CORRUPTIONS)
            result["runs"].append(dict(row, dataset=GRAY_DS, n=args.memory_n, target="disk",
                                       label=f"ours, 2 workers, {MEMORY_CORRUPTIONS}"))
            os.remove(os.path.join(big, f"{GRAY_DS}_224.npz"))

        if not args.skip_estimate:
            print("whole-benchmark estimate ...", file=sys.stderr)
            est_in = os.path.join(tmp, "est")
            os.makedirs(os.path.join(est_in, "warm"))
            for d in mf.DATASETS:
                make_input(os.path.join(est_in, f"{d}_224.npz"), d, args.estimate_n)
                make_input(os.path.join(est_in, "warm", f"{d}_224.npz"), d, 2)
            out = subprocess.run([sys.executable, "-c", _ESTIMATE, est_in,
                                  os.path.join(tmp, "est_out"), str(args.estimate_n)],
                                 capture_output=True, text=True, check=True).stdout
            spi = json.loads(out.strip().splitlines()[-1])
            counts = {d: TEST_N[d] * 5 * len(mf.corruptions(d)) for d in mf.DATASETS}
            sec1 = sum(counts[d] * spi[d] for d in mf.DATASETS)
            def _sp(d):
                sm = result["summary"][d]
                return sm.get("speedup_2_vs_1_tmpfs", sm["speedup_2_vs_1_disk"])
            sp = {True: _sp(RGB_DS), False: _sp(GRAY_DS)}
            sec2 = sum(counts[d] * spi[d] / sp[mf.registry.RGB[d]] for d in mf.DATASETS)
            nbytes = sum(counts[d] * SIZE * SIZE * (3 if mf.registry.RGB[d] else 1)
                         for d in mf.DATASETS)
            result["estimate_n"] = args.estimate_n
            result["estimate"] = {"seconds_per_image": spi, "images": sum(counts.values()),
                                  "gbytes": nbytes / 1e9, "hours_1_worker": sec1 / 3600,
                                  "hours_2_workers": sec2 / 3600,
                                  "hours_disk_bound": nbytes / (result["disk_write_mb_s"] * 1e6)
                                  / 3600}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    write_results(args, result, markdown)


if __name__ == "__main__":
    main()
