"""Runs the reference ``medmnistc`` 0.1.0 on given images. Runs in the REFERENCE's venv only.

The per-image pipeline (:func:`pipeline`) is the reference's DatasetManager:
``Image.fromarray(img).convert('RGB')`` -> ``apply(img, level - 1)`` -> ``convert('L')`` for
gray datasets -> ``np.array``. One thread for every library. Two modes, both subprocesses of a
benchmark script:

- timing (``bench_corruptions.py``): ``REF_PYTHON benchmarks/_reference_harness.py IN.npz
  OUT.json REPEATS``. ``IN.npz`` holds ``rgb`` (N, 224, 224, 3) and ``gray`` (N, 224, 224)
  uint8 arrays. An untimed warm-up call per level comes before the timed passes of each pair.
- outputs (``check_faithfulness.py``): ``REF_PYTHON benchmarks/_reference_harness.py outputs
  IN.npz JOBS.json OUT_DIR``. ``JOBS.json`` is a list of jobs ``{"id", "dataset",
  "corruption", "level", "kind" ("rgb" or "gray"), "seed", "angles", "members"}``; each job
  runs :func:`pipeline` on every image of ``IN.npz[kind]`` (``angles`` times for motion_blur,
  with ``numpy.random`` and ``random`` seeded by ``seed + call number`` and the angle the
  reference draws recorded). Writes ``OUT_DIR/outputs.npz`` (``{id}``: uint8 (calls, 224, 224
  [, 3]); ``{id}__angle``: float64 (calls,) degrees, motion_blur only) and
  ``OUT_DIR/meta.json`` (versions, and the reference's severity parameter of every
  ``(dataset, corruption, level)`` in ``members``, as float lists).
"""
import contextlib
import json
import os
import random
import sys
import time

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MAGICK_THREAD_LIMIT"):
    os.environ[var] = "1"

# Usage text before the reference's imports, so that it shows in any venv.
if __name__ == "__main__" and sys.argv[1:2] in (["-h"], ["--help"]):
    print(__doc__)
    sys.exit(0)
if __name__ == "__main__" and (len(sys.argv) not in (4, 5)
                               or (len(sys.argv) == 5) != (sys.argv[1] == "outputs")):
    print(__doc__, file=sys.stderr)
    sys.exit(2)

from _common import require_reference  # noqa: E402

require_reference("benchmarks/_reference_harness.py",
                  ("medmnistc", "cv2", "torch", "skimage", "scipy", "wand"))

import numpy  # noqa: E402

# NumPy 2 removed binary-mode fromstring, which the reference's motion blur calls.
numpy.fromstring = lambda b, dtype=float, **k: numpy.frombuffer(b, dtype)

import cv2  # noqa: E402
import torch  # noqa: E402
from medmnistc.corruptions.registry import CORRUPTIONS_DS, DATASET_RGB  # noqa: E402
from PIL import Image  # noqa: E402

cv2.setNumThreads(1)
torch.set_num_threads(1)


def pipeline(corruptor, img, level_index: int, rgb: bool) -> numpy.ndarray:
    """One image through the reference's DatasetManager: uint8 (224, 224, 3) or (224, 224)."""
    out = corruptor.apply(Image.fromarray(img).convert("RGB"), level_index)
    if not rgb:
        out = Image.fromarray(out).convert("L")
    return numpy.array(out)


def versions() -> dict:
    """Versions of the reference and of the libraries its corruptions call."""
    from importlib.metadata import version

    import scipy
    import skimage
    import wand.version
    return {"medmnistc": version("medmnistc"), "numpy": numpy.__version__,
            "torch": torch.__version__, "opencv": cv2.__version__, "pillow": Image.__version__,
            "scikit-image": skimage.__version__, "scipy": scipy.__version__,
            "ImageMagick": wand.version.MAGICK_VERSION}


def timing(src: str, dst: str, repeats: int) -> None:
    data = numpy.load(src)
    numpy.random.seed(0)
    random.seed(0)
    results = {}
    for dataset, table in CORRUPTIONS_DS.items():
        rgb = DATASET_RGB[dataset]
        imgs = data["rgb"] if rgb else data["gray"]
        for corruption, corruptor in table.items():
            corruptor.rng = numpy.random.default_rng(0)  # ImpulseNoise needs it
            for level in range(5):  # untimed warm-up, as ours has
                pipeline(corruptor, imgs[0], level, rgb)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for level in range(5):
                    for img in imgs:
                        pipeline(corruptor, img, level, rgb)
                times.append((time.perf_counter() - t0) / (5 * len(imgs)))
            results[f"{dataset}/{corruption}"] = times
    with open(dst, "w") as f:
        json.dump({"versions": versions(), "seconds_per_image": results}, f)


@contextlib.contextmanager
def recorded_uniform(log: list):
    """Within the block, every ``numpy.random.uniform`` draw is appended to ``log`` (the
    reference's motion blur draws its angle with ``np.random.uniform(-45, 45)``)."""
    orig = numpy.random.uniform

    def recording(*a, **k):
        v = orig(*a, **k)
        log.append(float(v))
        return v
    numpy.random.uniform = recording
    try:
        yield log
    finally:
        numpy.random.uniform = orig


def outputs(src: str, jobs_path: str, out_dir: str) -> None:
    data = numpy.load(src)
    with open(jobs_path) as f:
        jobs = json.load(f)
    arrays, params = {}, {}
    for job in jobs:
        corruptor = CORRUPTIONS_DS[job["dataset"]][job["corruption"]]
        rgb = job["kind"] == "rgb"
        outs, angles = [], []
        for a in range(job["angles"]):
            for i, img in enumerate(data[job["kind"]]):
                seed = job["seed"] + a * len(data[job["kind"]]) + i
                numpy.random.seed(seed)
                random.seed(seed)
                with recorded_uniform([]) as drawn:
                    outs.append(pipeline(corruptor, img, job["level"] - 1, rgb))
                angles.extend(drawn)
        arrays[job["id"]] = numpy.stack(outs)
        if job["corruption"] == "motion_blur":
            assert len(angles) == len(outs), (job["id"], len(angles), len(outs))
            arrays[job["id"] + "__angle"] = numpy.array(angles, numpy.float64)
        for dataset, corruption, level in job["members"]:
            p = CORRUPTIONS_DS[dataset][corruption].severity_params[level - 1]
            params[f"{dataset}/{corruption}/{level}"] = numpy.asarray(p, float).ravel().tolist()
    numpy.savez(os.path.join(out_dir, "outputs.npz"), **arrays)
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump({"versions": versions(), "params": params}, f)


def main():
    if sys.argv[1] == "outputs":
        outputs(*sys.argv[2:5])
    else:
        timing(sys.argv[1], sys.argv[2], int(sys.argv[3]))


if __name__ == "__main__":
    main()
