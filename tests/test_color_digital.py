"""Colour and digital kernels against oracles built from the reference's own libraries
(Pillow ImageEnhance / resize / JPEG, scikit-image rgb2hsv / hsv2rgb) applied directly, and the
gray L -> RGB -> corrupt -> L pipeline written out with Pillow."""
import io

import numpy as np
import pytest
import skimage.color
from PIL import Image, ImageEnhance

import medmnistc_fast as mf


def pil_rgb(a):
    return Image.fromarray(a).convert("RGB")


def gray_pipeline(img2d, fn):
    """The reference's dataset generation for gray datasets: L -> RGB -> fn -> L."""
    return np.array(Image.fromarray(np.asarray(fn(pil_rgb(img2d)))).convert("L"))


def ref_pixelate(pil, f):
    w, h = pil.size
    return np.array(pil.resize((int(w * f), int(h * f)), Image.BOX).resize((w, h), Image.BOX))


def ref_jpeg(pil, q):
    buf = io.BytesIO()
    pil.save(buf, "JPEG", quality=q)
    return np.array(Image.open(buf))


def ref_gamma(pil, g):
    lut = [int((255 + 1 - 1e-3) * pow(v / 255.0, g)) for v in range(256)] * 3
    return np.array(pil.point(lut))


def ref_saturate(arr, c):
    hsv = skimage.color.rgb2hsv(arr / 255.0)
    hsv[:, :, 1] = np.clip(hsv[:, :, 1] + c, 0, 1)
    return (np.clip(skimage.color.hsv2rgb(hsv), 0, 1) * 255).astype(np.uint8)


REFS = {
    "pixelate": lambda pil, p: ref_pixelate(pil, p),
    "jpeg_compression": lambda pil, p: ref_jpeg(pil, p),
    "brightness_up": lambda pil, p: np.array(ImageEnhance.Brightness(pil).enhance(p)),
    "brightness_down": lambda pil, p: np.array(ImageEnhance.Brightness(pil).enhance(p)),
    "contrast_up": lambda pil, p: np.array(ImageEnhance.Contrast(pil).enhance(p)),
    "contrast_down": lambda pil, p: np.array(ImageEnhance.Contrast(pil).enhance(p)),
    "gamma_corr_up": ref_gamma,
    "gamma_corr_down": ref_gamma,
    "saturate": lambda pil, p: ref_saturate(np.array(pil), p),
}

PAIRS = [(d, c) for d in mf.DATASETS for c in mf.corruptions(d) if c in REFS]


@pytest.mark.parametrize("dataset, corruption", PAIRS)
def test_bit_exact_against_library_oracle(dataset, corruption, rgb224, gray224):
    rgb = mf.registry.RGB[dataset]
    for img in (rgb224 if rgb else gray224):
        for level, param in enumerate(mf.severity_table(dataset, corruption), start=1):
            if rgb:
                expected = REFS[corruption](pil_rgb(img), param)
            else:
                expected = gray_pipeline(img, lambda pil: REFS[corruption](pil, param))
            got = mf.corrupt(img, corruption, level, dataset=dataset)
            assert np.array_equal(got, expected), (dataset, corruption, level)


@pytest.mark.parametrize("fn, arg, ref", [
    (mf.functional.saturate, 0.25, lambda pil: ref_saturate(np.array(pil), 0.25)),
    (mf.functional.contrast, 1.6, lambda pil: np.array(ImageEnhance.Contrast(pil).enhance(1.6))),
])
def test_gray_through_rgb_for_colour_ops(fn, arg, ref, gray224):
    """Functional calls on gray images give the L -> RGB -> op -> L result, even for the
    colour-dependent saturation."""
    img = gray224[1][40:140, 10:200]
    assert np.array_equal(fn(img, arg), gray_pipeline(img, ref))


def test_small_and_odd_sizes_do_not_crash():
    img = np.random.default_rng(1).integers(0, 256, (10, 13, 3), dtype=np.uint8)
    out = mf.corrupt(img, "pixelate", 5, dataset="tissuemnist")  # int(10 * 0.1) == 1
    assert out.shape == img.shape
    assert np.array_equal(out, ref_pixelate(Image.fromarray(img), 0.1))
    # Non-square with both reduced sides above 1 and different (10 x 13 at 0.1 reduces both to
    # 1 px, where swapping width and height goes unseen): every tissuemnist level, gray and RGB.
    for shape in [(37, 61, 3), (61, 37, 1), (12, 200, 1)]:
        img = np.random.default_rng(shape[0]).integers(0, 256, shape, dtype=np.uint8)
        img = img[..., 0] if shape[2] == 1 else img
        for level, f in enumerate(mf.severity_table("tissuemnist", "pixelate"), start=1):
            out = mf.corrupt(img, "pixelate", level, dataset="tissuemnist")
            assert np.array_equal(out, ref_pixelate(Image.fromarray(img), f)), (shape, level)


def test_jpeg_bit_exact_on_odd_shapes_and_strided_inputs():
    """RGB goes to Pillow as a mapped "RGBX" copy: the same bytes as Pillow's save / open of
    ``Image.fromarray`` for widths that are not multiples of 16 pixels (the padding kernel's
    tail), non-contiguous and read-only inputs, gray and RGB."""
    rng = np.random.default_rng(7)
    for h, w in [(8, 8), (9, 17), (15, 16), (31, 33), (8, 97), (100, 101)]:
        smooth = np.asarray(Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
                            .resize((max(1, w // 3), max(1, h // 3))).resize((w, h), Image.BILINEAR))
        for img in (smooth, rng.integers(0, 256, (h, w, 3), dtype=np.uint8)):
            for q in (1, 7, 50, 95):
                expected = ref_jpeg(Image.fromarray(img), q)
                assert np.array_equal(mf.functional.jpeg_compression(img, q), expected), (h, w, q)
            flipped = img[::-1, ::-1]
            flipped.setflags(write=False)
            assert np.array_equal(mf.functional.jpeg_compression(flipped, 20),
                                  ref_jpeg(Image.fromarray(np.ascontiguousarray(flipped)), 20))
            gray = np.ascontiguousarray(img[:, :, 1])
            assert np.array_equal(mf.functional.jpeg_compression(gray, 20),
                                  ref_jpeg(Image.fromarray(gray), 20))


def test_jpeg_in_worker_threads_and_forked_children():
    """Threads other than the main one encode into a per-thread memory file (Pillow releases
    the GIL writing to a file descriptor, not to BytesIO): the same bytes as Pillow's BytesIO
    round trip, with many threads at once, and in a child forked by a worker thread that had
    already used its file (the child must not write into the parent's)."""
    import os
    import threading
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9)
    cases = [(rng.integers(0, 256, (h, w, c), dtype=np.uint8), q)
             for h, w, c in [(224, 224, 3), (37, 61, 3), (64, 64, 1), (9, 300, 1)]
             for q in (5, 30, 90)]
    want = [ref_jpeg(Image.fromarray(img[..., 0] if img.shape[2] == 1 else img), q)
            for img, q in cases]

    def run(k):
        img, q = cases[k % len(cases)]
        assert threading.current_thread() is not threading.main_thread()
        return mf.functional.jpeg_compression(img[..., 0] if img.shape[2] == 1 else img, q)

    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(run, range(8 * len(cases))))
    for k, out in enumerate(got):
        assert np.array_equal(out, want[k % len(cases)]), k

    def fork_from_worker():
        run(0)  # this thread's memory file exists now
        r, w = os.pipe()
        with warnings.catch_warnings():  # Python 3.12+: fork() of a multi-threaded process
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # child: the forking thread (now its main thread) and a new worker thread
            try:
                img, q = cases[1]
                ok = np.array_equal(mf.functional.jpeg_compression(img, q), want[1])
                with ThreadPoolExecutor(1) as ex2:
                    ok = ok and np.array_equal(ex2.submit(run, 2).result(), want[2])
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        flag = os.read(r, 1)
        os.waitpid(pid, 0)
        # The parent's file still gives the right bytes after the child used its own.
        return flag, np.array_equal(run(3), want[3])

    with ThreadPoolExecutor(1) as ex:
        assert ex.submit(fork_from_worker).result() == (b"1", True)


@pytest.mark.parametrize("err", ["EMFILE", "ENOSYS"])
def test_jpeg_in_worker_threads_without_a_memory_file(monkeypatch, err):
    """A thread that cannot create its memory file (the process at its open-file limit:
    EMFILE; a kernel before 3.17 or a sandbox without memfd_create: ENOSYS) encodes through
    BytesIO as the main thread does; it raised OSError "Too many open files" (reproduced with
    RLIMIT_NOFILE reached), where the BytesIO path needs no file descriptor."""
    import errno
    import os
    import threading
    from concurrent.futures import ThreadPoolExecutor

    def refuse(*args, **kwargs):
        raise OSError(getattr(errno, err), os.strerror(getattr(errno, err)))

    monkeypatch.setattr(os, "memfd_create", refuse)
    rng = np.random.default_rng(4)
    rgb = rng.integers(0, 256, (40, 52, 3), dtype=np.uint8)
    gray = rng.integers(0, 256, (33, 20), dtype=np.uint8)

    def run(_):  # a fresh thread: no memory file made before the patch
        assert threading.current_thread() is not threading.main_thread()
        return (mf.functional.jpeg_compression(rgb, 12), mf.functional.jpeg_compression(gray, 70))

    with ThreadPoolExecutor(2) as ex:
        for out_rgb, out_gray in ex.map(run, range(4)):
            np.testing.assert_array_equal(out_rgb, ref_jpeg(Image.fromarray(rgb), 12))
            np.testing.assert_array_equal(out_gray, ref_jpeg(Image.fromarray(gray), 70))


def test_rgbx_pixels_pads_every_pixel():
    from medmnistc_fast import _native

    rng = np.random.default_rng(8)
    for h, w in [(1, 1), (1, 15), (1, 16), (1, 17), (3, 11), (7, 48), (224, 224)]:
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        out = _native.rgbx_pixels(img)
        assert out.shape == (h, w, 4) and out.dtype == np.uint8
        assert np.array_equal(out[:, :, :3], img) and np.all(out[:, :, 3] == 255)
    with pytest.raises(ValueError, match="3 channels"):
        _native.rgbx_pixels(np.zeros((2, 2, 4), np.uint8))


def test_gamma_lut_equals_torchvision_formula_for_random_gammas():
    """The table (C++ ``pow``) equals the per-value Python ``pow`` of torchvision's PIL
    adjust_gamma for arbitrary (augmentation-drawn) gammas, including near-integer products."""
    from medmnistc_fast.corruptions.color import gamma_lut

    gammas = list(np.random.default_rng(0).uniform(0.05, 6.0, 3000)) + [0.0, 0.5, 1.0, 2.0, 3.0]
    for g in gammas:
        ref = [int((255 + 1 - 1e-3) * pow(v / 255.0, float(g))) for v in range(256)]
        assert gamma_lut.__wrapped__(float(g)).tolist() == ref, g


def test_blend_luts_equal_pillows_blend():
    """Brightness and contrast tables (C++ float32) against Pillow's own Image.blend for random
    factors inside and outside [0, 1] and random gray levels."""
    from medmnistc_fast.corruptions.color import brightness_lut, contrast_lut

    ramp = Image.frombytes("L", (256, 1), bytes(range(256)))
    rng = np.random.default_rng(4)
    factors = np.concatenate([rng.uniform(0, 1, 400), rng.uniform(1, 4, 400),
                              rng.uniform(-1, 0, 100), rng.uniform(0.999, 1.001, 100),
                              [0.0, 1.0, 0.5, 2.0]])
    for i, f in enumerate(factors):
        base = int(rng.integers(0, 256))
        pil = np.asarray(Image.blend(Image.new("L", (256, 1), base), ramp, float(f))).ravel()
        np.testing.assert_array_equal(contrast_lut.__wrapped__(float(f), base), pil)
        black = np.asarray(Image.blend(Image.new("L", (256, 1), 0), ramp, float(f))).ravel()
        np.testing.assert_array_equal(brightness_lut.__wrapped__(float(f)), black)


def test_jpeg_memory_file_does_not_keep_huge_images():
    # A worker thread's memory file keeps the last JPEG; one over 1 MiB (a large noisy image at
    # high quality) is dropped after its bytes are read, so a thread does not hold it for life.
    import os
    from concurrent.futures import ThreadPoolExecutor

    from medmnistc_fast.corruptions import digital

    rng = np.random.default_rng(3)
    big = rng.integers(0, 256, (1200, 1200, 3), dtype=np.uint8)
    small = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)

    def sizes():
        out = []
        for img in (small, big):
            res = mf.functional.jpeg_compression(img, 95)
            assert np.array_equal(res, ref_jpeg(Image.fromarray(img), 95))
            out.append(os.fstat(digital._JPEG_SINKS.file.fileno()).st_size)
        return out

    with ThreadPoolExecutor(1) as ex:
        kept_small, kept_big = ex.submit(sizes).result()
    assert 0 < kept_small <= digital._MEMORY_FILE_KEEP and kept_big == 0


@pytest.mark.parametrize("shape", [(8, 65_501), (65_501, 8, 3)])
def test_jpeg_side_past_libjpegs_limit_is_a_value_error(shape):
    # libjpeg encodes sides up to 65,500 px; past it Pillow raised a bare OSError ("broken data
    # stream"). The side at the limit still works, and the refused input is not touched.
    img = np.full(shape, 7, np.uint8)
    with pytest.raises(ValueError, match=r"65,500 px.*65501"):
        mf.functional.jpeg_compression(img, 50)
    dataset = "chestmnist" if img.ndim == 2 else "pathmnist"
    with pytest.raises(ValueError, match=r"^image: jpeg_compression .*65,500 px"):
        mf.corrupt(img, "jpeg_compression", 1, dataset=dataset)
    with pytest.raises(ValueError, match=r"^images: jpeg_compression .*65,500 px"):
        mf.corrupt_batch(img[None], "jpeg_compression", 1, dataset=dataset)
    aug = mf.AugMedMNISTC(dataset, corruptions=["jpeg_compression"], identity=False)
    with pytest.raises(ValueError, match=r"^image: jpeg_compression .*65,500 px"):
        aug.apply(img, aug.draw())
    # A transform that may draw JPEG refuses the image at once, whatever it draws this time
    # (it failed only when JPEG came up); one that cannot draw JPEG takes it.
    mixed = mf.AugMedMNISTC(dataset, corruptions=["jpeg_compression", "pixelate"],
                            identity=False, weights={"jpeg_compression": 0.01, "pixelate": 1})
    for call, name in ((lambda: mixed(img), "image"), (lambda: mixed.batch(img[None]), "images")):
        with pytest.raises(ValueError, match=rf"^{name}: jpeg_compression, one of this "
                                             r"transform's choices, .*65,500 px"):
            call()
    never = mf.AugMedMNISTC(dataset, corruptions=["jpeg_compression", "pixelate"],
                            identity=False, weights={"jpeg_compression": 0, "pixelate": 1})
    assert never(img).shape == img.shape
    assert (img == 7).all()
    edge = np.full((8, 65_500), 7, np.uint8)
    assert np.array_equal(mf.functional.jpeg_compression(edge, 50),
                          ref_jpeg(Image.fromarray(edge), 50))
