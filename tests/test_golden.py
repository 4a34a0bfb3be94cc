"""medmnistc_fast against golden files recorded from the real reference (medmnistc 0.1.0).

The files (tests/golden, made by tools/make_golden.py in the reference's own venv; see
tests/golden/README.md) hold the reference's outputs on real 224 px images for every
(dataset, corruption, level). Tolerances are design.md section 3.
"""
import json
import os
from functools import lru_cache

import numpy as np
import pytest

import medmnistc_fast as mf
from medmnistc_fast import functional as F
from tests.tolerances import MAX_ABS, MOTION_WITHIN1, RANDOM, manifest_form

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
with open(os.path.join(GOLDEN, "MANIFEST.json")) as _f:
    MANIFEST = json.load(_f)


@lru_cache(maxsize=None)
def load(name):
    return np.load(os.path.join(GOLDEN, name), allow_pickle=False)


def inputs(image):
    return load("inputs.npz")["image__" + image]


def entries(mode):
    return sorted(k for k, e in MANIFEST["entries"].items() if e["mode"] == mode)


def test_manifest_checksums():
    import hashlib

    for name, info in MANIFEST["files"].items():
        with open(os.path.join(GOLDEN, name), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == info["sha256"], name


def test_manifest_covers_every_pair():
    expected = {f"{d}/{c}/{s}" for d in mf.DATASETS for c in mf.corruptions(d)
                for s in range(1, 6)}
    assert set(MANIFEST["entries"]) == expected
    # The files were made for the table this suite applies.
    assert MANIFEST["tolerances_intended"] == manifest_form()
    # Each entry is checked the way the tolerance table says: sample by sample (motion blur at
    # its recorded angles) for the deterministic corruptions, in distribution for the rest.
    for key, entry in MANIFEST["entries"].items():
        corruption = key.split("/")[1]
        mode = ("motion" if corruption == "motion_blur" else "exact"
                if corruption in MAX_ABS else "stats" if corruption in RANDOM else None)
        assert entry["mode"] == mode, (key, entry["mode"])


def test_severity_tables_equal_the_references():
    # Each entry's param is the reference's table value, recorded by tools/make_golden.py from
    # medmnistc's own tables (JSON: tuples as lists, zoom lists as numpy.arange's exact floats).
    # The motion entries below run F.motion_blur with this recorded param, not the registry's,
    # so without this check a wrong motion_blur table passed every golden test (mutation check:
    # one radius 10 -> 11).
    wrong = []
    for entry, e in sorted(MANIFEST["entries"].items()):
        dataset, corruption, level = entry.split("/")
        ours = mf.severity_table(dataset, corruption)[int(level) - 1]
        if json.loads(json.dumps(ours)) != e["param"]:
            wrong.append((entry, ours, e["param"]))
    assert len(MANIFEST["entries"]) == 655 and wrong == []


@pytest.mark.parametrize("entry", entries("exact"))
def test_deterministic_outputs(entry):
    dataset, corruption, level = entry.split("/")
    rec = MANIFEST["records"][MANIFEST["entries"][entry]["record"]]
    data = load(rec["file"])
    for image in rec["images"]:
        ref = data[rec["arrays"][image]["out"]]
        ours = mf.corrupt(inputs(image), corruption, int(level), dataset=dataset)
        diff = np.abs(ours.astype(np.int16) - ref)
        assert diff.max() <= MAX_ABS[corruption], (entry, image, int(diff.max()),
                                                   int(np.count_nonzero(diff)))


@pytest.mark.parametrize("entry", entries("motion"))
def test_motion_blur_at_recorded_angle(entry):
    dataset, corruption, level = entry.split("/")
    rec = MANIFEST["records"][MANIFEST["entries"][entry]["record"]]
    radius, sigma = rec["param"]
    data = load(rec["file"])
    for image in rec["images"]:
        names = rec["arrays"][image]
        for out, angle in zip(data[names["out"]], data[names["angle"]]):
            ours = F.motion_blur(inputs(image), radius, sigma, float(angle))
            diff = np.abs(ours.astype(np.int16) - out)
            assert np.mean(diff <= 1) >= MOTION_WITHIN1, (entry, image, angle)
            assert diff.max() <= MAX_ABS[corruption], (entry, image, angle)


def test_motion_blur_direction_probe():
    """A one-pixel image at forced angles: our streak lies where the reference's does."""
    probe = MANIFEST["motion_probe"]
    data = load(probe["file"])
    src = data[probe["input"]]
    for (radius, sigma), outs in zip(data[probe["params"]], data[probe["out"]]):
        for angle, ref in zip(data[probe["angles"]], outs):
            ours = F.motion_blur(src, float(radius), float(sigma), float(angle))
            assert np.abs(ours.astype(np.int16) - ref).max() <= 1, (radius, sigma, angle)


STATS_DRAWS = 60


def _our_stats(corruption, dataset, level, clean):
    batch = np.repeat(clean[None], STATS_DRAWS, axis=0)
    outs = mf.corrupt_batch(batch, corruption, level, dataset=dataset, seed=2024)
    d = outs.astype(np.int16) - batch
    axes = tuple(range(1, d.ndim))
    changed = d != 0
    px = changed.any(axis=-1) if d.ndim == 4 else changed
    return np.stack([d.mean(axis=axes), np.abs(d).mean(axis=axes), d.std(axis=axes),
                     changed.mean(axis=axes), px.reshape(STATS_DRAWS, -1).mean(axis=1)], axis=1)


#: Allowed difference of the per-draw means, in units of the two samples' combined standard
#: error, plus an absolute floor (gray levels or fractions) for near-deterministic statistics.
#: characters is drawn with a different (Pillow) font than OpenCV's Hershey font, so its
#: statistics are compared with a looser relative bound.
Z = 5.0
REL = {"characters": 0.5}


@pytest.mark.parametrize("entry", entries("stats"))
def test_random_corruptions_in_distribution(entry):
    dataset, corruption, level = entry.split("/")
    rec = MANIFEST["records"][MANIFEST["entries"][entry]["record"]]
    data = load(rec["file"])
    for image in rec["images"][:2]:
        ref = data[rec["arrays"][image]["stats"]]
        ours = _our_stats(corruption, dataset, int(level), inputs(image))
        for j, col in enumerate(MANIFEST["stat_columns"]):
            m_ref, m_ours = ref[:, j].mean(), ours[:, j].mean()
            se = np.sqrt(ref[:, j].var() / len(ref) + ours[:, j].var() / len(ours))
            floor = 0.02 * abs(m_ref) + (0.02 if "frac" in col else 0.05)
            if corruption in REL:
                floor = REL[corruption] * abs(m_ref) + floor
            assert abs(m_ours - m_ref) <= Z * se + floor, (entry, image, col, m_ours, m_ref)


@pytest.mark.parametrize("entry", [e for e in entries("stats")
                                   if MANIFEST["entries"][e]["record"].split("/")[0].endswith(
                                       "_noise")])
def test_noise_flat_histograms(entry):
    """Output-value histograms of flat inputs (all elements pooled) against the reference's,
    by a two-sample chi-square test; on gray datasets this is the L -> RGB -> noise -> L law."""
    from scipy.stats import chi2_contingency

    dataset, corruption, level = entry.split("/")
    rec = MANIFEST["records"][MANIFEST["entries"][entry]["record"]]
    hist = load(rec["file"])[rec["flat_hist"]]
    flat = load("inputs.npz")
    rgb = mf.registry.RGB[dataset]
    for row, v in enumerate((0, 64, 128, 200, 255)):
        img = flat[f"flat__{v}"]
        if rgb:
            img = np.repeat(img[..., None], 3, axis=2)
        ours = mf.corrupt_batch(np.repeat(img[None], 8, axis=0), corruption, int(level),
                                dataset=dataset, seed=7)
        counts = np.bincount(ours.ravel(), minlength=256)
        table = np.stack([hist[row], counts])
        table = table[:, table.sum(axis=0) > 0]
        if table.shape[1] < 2:
            assert np.array_equal(np.nonzero(hist[row])[0], np.nonzero(counts)[0])
            continue
        # Pool sparse columns so the chi-square approximation holds.
        expected_min = table.sum(axis=0) * table.sum(axis=1).min() / table.sum()
        sparse = expected_min < 5
        if sparse.any():
            table = np.concatenate([table[:, ~sparse], table[:, sparse].sum(axis=1,
                                                                            keepdims=True)], 1)
        p = chi2_contingency(table)[1] if table.shape[1] > 1 else 1.0
        assert p > 1e-6, (entry, v, p)
