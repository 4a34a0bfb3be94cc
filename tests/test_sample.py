"""The embedded sample's argument checks (medmnistc_fast.sample)."""
import numpy as np
import pytest

from medmnistc_fast import registry
from medmnistc_fast.sample import sample_images, sample_split


@pytest.mark.parametrize("dataset", registry.PATHOLOGY_SUITES + ("nope",))
def test_sample_split_rejects_non_medmnist_keys(dataset):
    # The pathology keys are registry datasets but have no MedMNIST label layout: a ValueError
    # naming the valid datasets, not a KeyError from the label tables.
    with pytest.raises(ValueError, match="unknown dataset.*pathmnist"):
        sample_split(dataset, size=8, n=1)


def test_sample_split_rejects_non_str():
    with pytest.raises(TypeError, match="dataset must be a str"):
        sample_split(3, size=8, n=1)


@pytest.mark.parametrize("kwargs, exc, name", [
    ({"n": 2.0}, TypeError, "n"), ({"n": True}, TypeError, "n"), ({"n": -1}, ValueError, "n"),
    ({"n": 1, "size": 8.0}, TypeError, "size"), ({"n": 1, "size": 7}, ValueError, "size"),
    ({"n": 1, "size": 4097}, ValueError, "size"), ({"n": 0, "size": 100000}, ValueError, "size"),
    ({"n": 1, "size": 8, "rgb": 1}, TypeError, "rgb"),
    ({"n": 1, "size": 8, "rgb": None}, TypeError, "rgb"),
])
def test_sample_images_argument_errors(kwargs, exc, name):
    with pytest.raises(exc, match=f"^{name} must be "):
        sample_images(**kwargs)


def test_sample_images_numpy_ints_like_python_ints():
    """NumPy integers are ints here as everywhere else in the package (_validation._is_int)."""
    a = sample_images(np.int64(3), np.int32(16), rgb=False)
    np.testing.assert_array_equal(a, sample_images(3, 16, rgb=False))
    with pytest.raises(TypeError, match="^n must be an int"):
        sample_images(np.bool_(True))


def test_sample_split_layout():
    d = sample_split("chestmnist", size=8, n=3)
    assert d["test_images"].shape == (3, 8, 8) and d["test_images"].dtype == np.uint8
    assert d["test_labels"].shape == (3, 14) and set(np.unique(d["test_labels"])) <= {0, 1}
    d = sample_split("pathmnist", size=8, n=10)
    assert d["val_images"].shape == (10, 8, 8, 3)
    assert d["val_labels"][:, 0].tolist() == [i % 9 for i in range(10)]


@pytest.mark.parametrize("n, size, rgb", [
    (10 ** 30, 8, True),            # was NumPy's "Maximum allowed dimension exceeded"
    (10 ** 12, 224, False),         # was a MemoryError (smaller n: minutes of resampling)
])
def test_sample_images_too_large(n, size, rgb):
    per_image = size * size * (3 if rgb else 1)
    with pytest.raises(ValueError, match=rf"^n must be at most {2**32 // per_image} for {size} x "
                                         rf"{size} px {'RGB' if rgb else 'gray'} images \(n x size "
                                         r"x size x channels at most 4294967296 bytes"):
        sample_images(n, size, rgb=rgb)


def test_sample_size_bound_is_inclusive_and_per_channel():
    from medmnistc_fast.sample import MAX_BYTES, check_sample_shape
    assert check_sample_shape(MAX_BYTES // 64, 8, False) == (MAX_BYTES // 64, 8)
    with pytest.raises(ValueError, match=rf"^n must be at most {MAX_BYTES // 64} .*got "
                                         rf"{MAX_BYTES // 64 + 1}: "):
        check_sample_shape(MAX_BYTES // 64 + 1, 8, False)   # one image beyond the bound
    with pytest.raises(ValueError, match=rf"^n must be at most {MAX_BYTES // 192} for 8 x 8 px RGB"):
        check_sample_shape(MAX_BYTES // 64, 8, True)   # three channels: three times the bytes


def test_missing_dicom_file_names_the_pydicom_to_install(monkeypatch, tmp_path):
    """pydicom < 3.0.1 (all that Python 3.9 gets) lacks examples_rgb_color.dcm: the sample
    used to fail with dcmread's bare FileNotFoundError; found by a newcomer trial on 3.9."""
    import pydicom.data

    from medmnistc_fast import sample

    monkeypatch.setattr(pydicom.data, "__file__", str(tmp_path / "__init__.py"))
    sample.source_images.cache_clear()
    try:
        with pytest.raises(FileNotFoundError,
                           match=r"examples_rgb_color\.dcm, shipped in pydicom >= 3\.0\.1"):
            sample_images(1, 8, rgb=True)
        with pytest.raises(FileNotFoundError, match=r"CT_small\.dcm, shipped in pydicom"):
            sample_images(1, 8, rgb=False)
    finally:
        sample.source_images.cache_clear()
