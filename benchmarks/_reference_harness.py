"""Times the reference ``medmnistc`` 0.1.0 on given images. Runs in the REFERENCE's venv only.

Invoked by ``bench_corruptions.py`` as a subprocess:
``REF_PYTHON benchmarks/_reference_harness.py IN.npz OUT.json REPEATS``. ``IN.npz`` holds
``rgb`` (N, 224, 224, 3) and ``gray`` (N, 224, 224) uint8 arrays. The per-image pipeline is the
reference's DatasetManager: ``Image.fromarray(img).convert('RGB')`` -> ``apply(img, level - 1)``
-> ``convert('L')`` for gray datasets -> ``np.array``. One thread for every library. An
untimed warm-up call per level comes before the timed passes of each pair.
"""
import json
import os
import sys
import time

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MAGICK_THREAD_LIMIT"):
    os.environ[var] = "1"

import numpy  # noqa: E402

# NumPy 2 removed binary-mode fromstring, which the reference's motion blur calls.
numpy.fromstring = lambda b, dtype=float, **k: numpy.frombuffer(b, dtype)

import cv2  # noqa: E402
import torch  # noqa: E402
from medmnistc.corruptions.registry import CORRUPTIONS_DS, DATASET_RGB  # noqa: E402
from PIL import Image  # noqa: E402

cv2.setNumThreads(1)
torch.set_num_threads(1)


def main():
    src, dst, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    data = numpy.load(src)
    numpy.random.seed(0)
    import random
    random.seed(0)
    results = {}
    for dataset, table in CORRUPTIONS_DS.items():
        imgs = data["rgb"] if DATASET_RGB[dataset] else data["gray"]
        for corruption, corruptor in table.items():
            corruptor.rng = numpy.random.default_rng(0)  # ImpulseNoise needs it
            for level in range(5):  # untimed warm-up, as ours has
                out = corruptor.apply(Image.fromarray(imgs[0]).convert("RGB"), level)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for level in range(5):
                    for img in imgs:
                        out = corruptor.apply(Image.fromarray(img).convert("RGB"), level)
                        if not DATASET_RGB[dataset]:
                            out = Image.fromarray(out).convert("L")
                        numpy.array(out)
                times.append((time.perf_counter() - t0) / (5 * len(imgs)))
            results[f"{dataset}/{corruption}"] = times
    with open(dst, "w") as f:
        json.dump({"versions": {"numpy": numpy.__version__, "torch": torch.__version__,
                                "opencv": cv2.__version__,
                                "pillow": Image.__version__}, "seconds_per_image": results}, f)


if __name__ == "__main__":
    main()
