"""Generation from an image folder (``--from-folder``, ``folder=``) and from arrays (``images=``).

The folder holds real pathology patches: scikit-image's immunohistochemistry image (a
bundled 512 x 512 RGB micrograph) cut into 96 px tiles, saved as PNG with a few as TIFF and
JPEG, in two class folders. Expected outputs are built independently: the stacked patches (as
Pillow decodes each file) through :func:`medmnistc_fast.corrupt_batch`, severity-major, labels
tiled five times.
"""
import hashlib
import io
import json
import os
import re
import shutil
import struct
import subprocess
import zlib

import numpy as np
import pytest
from PIL import Image
from skimage import data as skdata

import medmnistc_fast as mf
from medmnistc_fast.cli import main
from medmnistc_fast.generate import folder_suite, generate
from tests.test_generate import sha, tree

# The shared folder holds a non-image file and a nested folder on purpose (they must be
# skipped); the warning about them is checked once, in test_skipped_entries_are_named.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:2 entries of .* and its class folders .* were skipped:UserWarning")

SEED = 7
SUITE = "pathology96"
CLASSES = ("benign", "tumour")
# (class, file name) in the order the folder must be read: classes sorted, names sorted.
# Mixed extensions and cases; 25 tiles of the 5 x 5 grid.
EXT = {3: ".TIF", 8: ".tiff", 11: ".jpg", 17: ".JPEG"}




def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def tiles(size=96):
    im = skdata.immunohistochemistry()
    return [im[r:r + size, c:c + size] for r in range(0, 5 * size, size)
            for c in range(0, 5 * size, size)]


def save(arr, path):
    ext = os.path.splitext(path)[1].lower()
    fmt = {".png": "PNG", ".tif": "TIFF", ".tiff": "TIFF", ".jpg": "JPEG", ".jpeg": "JPEG"}[ext]
    Image.fromarray(arr).save(path, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """(root, rows) with rows = [(relative path, label, decoded image)] in reading order."""
    root = tmp_path_factory.mktemp("ihc")
    rows = []
    for k, patch in enumerate(tiles()):
        label = 0 if k < 13 else 1
        name = f"tile{k:02d}{EXT.get(k, '.png')}"
        d = root / CLASSES[label]
        d.mkdir(exist_ok=True)
        save(patch, d / name)
        with Image.open(d / name) as im:
            decoded = np.asarray(im.convert("RGB"))
        if EXT.get(k, ".png").lower() not in (".jpg", ".jpeg"):
            np.testing.assert_array_equal(decoded, patch)    # lossless formats round-trip
        rows.append((f"{CLASSES[label]}/{name}", label, decoded))
    # Entries that must be ignored: hidden files and folders, non-image files, nested folders.
    (root / ".DS_Store").write_bytes(b"junk")
    (root / ".cache").mkdir()
    (root / ".cache" / "x.png").write_bytes(b"junk")
    (root / "benign" / ".hidden.png").write_bytes(b"junk")
    (root / "benign" / "notes.txt").write_text("not an image")
    (root / "tumour" / "nested").mkdir()
    save(tiles()[0], root / "tumour" / "nested" / "deep.png")
    return root, rows


@pytest.fixture(scope="module")
def reference(folder, tmp_path_factory):
    """The CLI run everything else is compared with (in-process, one worker)."""
    root, _ = folder
    out = tmp_path_factory.mktemp("ref")
    assert main(["generate", "--dataset", SUITE, "--from-folder", str(root), "--out", str(out),
                 "--workers", "1", "--seed", str(SEED), "--quiet"]) == 0
    return out


def expected_checksum(rows, root):
    h = hashlib.sha256()
    for rel, label, _ in rows:
        b = rel.encode()
        h.update(struct.pack("<I", len(b)) + b + struct.pack("<q", label)
                 + hashlib.sha256((root / rel).read_bytes()).digest())
    return h.hexdigest()


def test_skipped_entries_are_named(folder, tmp_path):
    # Files of other formats (notes.txt) and nested folders in the class folders are skipped;
    # a newcomer's .bmp images vanished from the set without a word, so the run says which.
    root, rows = folder
    with pytest.warns(UserWarning, match=r"2 entries of .* and its class folders .* were "
                                         r"skipped: benign/notes\.txt, tumour/nested$"):
        generate(SUITE, tmp_path, folder=root, corruptions=["pixelate"], severities=[1],
                 workers=1, progress=False)
    with np.load(tmp_path / SUITE / "pixelate.npz") as z:
        assert z["test_images"].shape[0] == len(rows)


def test_non_image_files_at_the_top_are_skipped(tmp_path):
    # A README or labels file beside the class folders is not data: it is named and skipped,
    # and the output equals that of the same folder without it.
    outs = []
    for extra in (False, True):
        root = tmp_path / f"in{int(extra)}"
        for k, cls in enumerate(CLASSES):
            (root / cls).mkdir(parents=True)
            Image.fromarray(tiles()[k]).save(root / cls / "x.png")
        if extra:
            (root / "README.txt").write_text("patches from slide 3")
            (root / "labels.csv").write_text("x.png,0")
            with pytest.warns(UserWarning, match=r"2 entries of .*in1 and its class folders .* "
                                                 r"skipped: README\.txt, labels\.csv$"):
                generate(SUITE, tmp_path / "out1", folder=root, corruptions=["pixelate"],
                         severities=[1], workers=1, progress=False)
        else:
            generate(SUITE, tmp_path / "out0", folder=root, corruptions=["pixelate"],
                     severities=[1], workers=1, progress=False)
        with np.load(tmp_path / f"out{int(extra)}" / SUITE / "pixelate.npz") as z:
            outs.append((z["test_images"].copy(), z["test_labels"].copy()))
    assert outs[0][0].shape == (2, 96, 96, 3) and outs[0][1].ravel().tolist() == [0, 1]
    assert all(np.array_equal(a, b) for a, b in zip(*outs))


# ------------------------------------------------------------------------------- end to end
def test_folder_end_to_end(folder, reference):
    root, rows = folder
    X = np.stack([r[2] for r in rows])
    y = np.array([[r[1]] for r in rows], np.uint8)
    n = len(rows)
    d = reference / SUITE
    assert sorted(os.listdir(d)) == sorted([f"{c}.npz" for c in mf.corruptions(SUITE)]
                                           + ["manifest.json", "filenames.json"])
    for c in mf.corruptions(SUITE):
        with np.load(d / f"{c}.npz", allow_pickle=False) as z:
            assert sorted(z.files) == ["test_images", "test_labels"]
            imgs, labs = z["test_images"], z["test_labels"]
        assert imgs.shape == (5 * n, 96, 96, 3) and imgs.dtype == np.uint8
        assert labs.dtype == np.uint8 and labs.shape == (5 * n, 1)
        np.testing.assert_array_equal(labs, np.tile(y, (5, 1)))
        want = np.concatenate([mf.corrupt_batch(X, c, s, dataset=SUITE, seed=SEED)
                               for s in range(1, 6)])
        np.testing.assert_array_equal(imgs, want, err_msg=c)

    m = read_json(d / "manifest.json")
    assert m["dataset"] == SUITE and m["seed"] == SEED and m["size"] == 96
    inp = m["input"]
    assert inp["source"] == "folder" and inp["root"] == str(root)
    assert inp["classes"] == list(CLASSES) and inp["n"] == n and inp["mode"] == "RGB"
    assert inp["image_shape"] == [96, 96, 3] and inp["labels_dtype"] == "|u1"
    assert inp["sha256"] == expected_checksum(rows, root)
    assert inp["filenames"] == "filenames.json"
    for c, entry in m["files"].items():
        assert entry["sha256"] == sha(d / f"{c}.npz")
    names = read_json(d / "filenames.json")
    assert names["classes"] == list(CLASSES) and names["root"] == str(root)
    assert names["files"] == [[rel, label] for rel, label, _ in rows]


def test_workers_byte_identical_and_auto_suite(folder, reference, tmp_path, capsys):
    root, _ = folder
    assert main(["generate", "--dataset", "pathology", "--from-folder", str(root),
                 "--out", str(tmp_path), "--workers", "2", "--chunk-size", "7",
                 "--seed", str(SEED)]) == 0
    err = capsys.readouterr().err
    assert "96 x 96 px images: using the pathology96 suite" in err
    assert f"pathology96: wrote {len(mf.corruptions(SUITE))} file(s)" in err
    assert tree(tmp_path) == tree(reference)


def test_auto_suite_names_skipped_entries_once(tmp_path, capsys):
    # --dataset pathology reads the folder twice (folder_suite, then generate): the warning about
    # the README was printed twice
    root = tmp_path / "in"
    for k, cls in enumerate(CLASSES):
        (root / cls).mkdir(parents=True)
        Image.fromarray(tiles()[k]).save(root / cls / "x.png")
    (root / "README.txt").write_text("patches from slide 3")
    assert main(["generate", "--dataset", "pathology", "--from-folder", str(root),
                 "--out", str(tmp_path / "out"), "--corruptions", "pixelate", "--severities", "1",
                 "--workers", "1", "--quiet"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert [ln for ln in lines if "warning" in ln] == [
        f"medmnistc-fast: warning: 1 entry of {root} and its class folders is not an image "
        f"generate reads (.png, .jpg, .jpeg, .tif, .tiff, any case) and was skipped: README.txt"]


def test_resume_after_deleting_a_file(folder, reference, tmp_path, capsys):
    root, _ = folder
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    os.remove(out / SUITE / "hue.npz")
    (out / SUITE / ".bubble.npz.0123456789ab.tmp").write_bytes(b"left by a killed run")
    args = ["generate", "--dataset", SUITE, "--from-folder", str(root), "--out", str(out),
            "--workers", "1", "--seed", str(SEED)]
    assert main(args) == 0
    err = capsys.readouterr().err
    n = len(mf.corruptions(SUITE))
    assert (f"wrote 1 file(s), {n - 1} already complete, removed 1 leftover temporary file(s)"
            in err)
    assert tree(out) == tree(reference)

    # The checksum uses paths below the folder: a moved copy of the folder resumes too.
    moved = tmp_path / "moved"
    shutil.copytree(root, moved)
    res = generate(SUITE, out, folder=moved, workers=1, seed=SEED)
    assert res[0]["written"] == [] and len(res[0]["skipped"]) == n

    # A changed image is another input: refused without --overwrite, nothing touched.
    before = tree(out)
    Image.fromarray(np.zeros((96, 96, 3), np.uint8)).save(moved / "tumour" / "tile20.png")
    with pytest.raises(ValueError, match="other parameters: input sha256="):
        generate(SUITE, out, folder=moved, workers=1, seed=SEED)
    assert tree(out) == before


def test_out_being_the_image_folder_is_refused(tmp_path, capsys):
    """--out DIR --from-folder DIR put {DIR}/{suite}/ beside the class folders: the run went
    through, and every later one (a resume) stopped at 'class folder .../{suite} holds no
    images'. Refused before anything is written, also through a symlink."""
    src = tmp_path / "in"
    for label, cls in enumerate(CLASSES):
        (src / cls).mkdir(parents=True)
        save(tiles()[label], src / cls / "a.png")
    link = tmp_path / "link"
    link.symlink_to(src)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for out in (src, link, f"{src}{os.sep}"):
        with pytest.raises(ValueError, match=r"out must be another folder than folder .*"
                                             r"the same folder"):
            generate(SUITE, out, folder=src, workers=1, corruptions="pixelate")
    assert main(["generate", "--dataset", SUITE, "--from-folder", str(src), "--out", str(src),
                 "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error: --out must be another folder than folder (--from-folder)" in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    # a folder beside it is fine, and resumes
    for _ in range(2):
        res = generate(SUITE, tmp_path / "out", folder=src, workers=1, corruptions="pixelate")
    assert res[0]["skipped"] == ["pixelate"]


def test_out_in_a_new_folder_inside_the_image_folder_is_refused(tmp_path):
    """--from-folder DIR --out DIR/results made DIR/results/{suite}/: the run went through,
    and the next (a resume) stopped at 'class folder .../results holds no images'. Refused
    before anything is written; inside an existing class folder the outputs are a skipped
    entry, and that still runs and resumes."""
    src = tmp_path / "in"
    for label, cls in enumerate(CLASSES):
        (src / cls).mkdir(parents=True)
        save(tiles()[label], src / cls / "a.png")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for out in (src / "results", src / "results" / "deeper"):
        with pytest.raises(ValueError, match=r"out must not be a new folder inside folder"):
            generate(SUITE, out, folder=src, workers=1, corruptions="pixelate")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    with pytest.warns(UserWarning, match="skipped"):
        for _ in range(2):
            res = generate(SUITE, src / CLASSES[0] / "res", folder=src, workers=1,
                           corruptions="pixelate")
    assert res[0]["skipped"] == ["pixelate"]


def test_out_whose_output_folder_is_the_image_folder_is_refused(tmp_path, capsys):
    """--out DIR --from-folder DIR/{suite} made {suite}'s output folder the image folder
    itself: the outputs were written beside the class folders, and every later run listed
    them as skipped entries. Refused before anything is written, for the suite named and for
    the folder's own size choice ('pathology'); another split's folder is another name."""
    src = tmp_path / SUITE
    for label, cls in enumerate(CLASSES):
        (src / cls).mkdir(parents=True)
        save(tiles()[label], src / cls / "a.png")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for key in (SUITE, "pathology"):
        with pytest.raises(ValueError, match=r"out must not be the folder that holds folder "
                                             r"\(--from-folder\) under the output folder's name"):
            generate(key, tmp_path, folder=src, workers=1, corruptions="pixelate")
        assert main(["generate", "--dataset", key, "--from-folder", str(src), "--out",
                     str(tmp_path), "--workers", "1", "--quiet"]) == 2
        assert "error: --out must not be the folder that holds folder" in capsys.readouterr().err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    res = generate(SUITE, tmp_path, folder=src, workers=1, corruptions="pixelate", split="val")
    assert res[0]["written"] == ["pixelate"]
    assert sorted(p.name for p in src.iterdir()) == sorted(CLASSES)
    # a named suite is refused before the folder is read: a damaged image does not come first
    (src / CLASSES[0] / "damaged.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match=r"^out must not be the folder that holds folder"):
        generate(SUITE, tmp_path, folder=src, workers=1, corruptions="pixelate")


@pytest.fixture
def bind_mount():
    """``bind(src, dst)``: mount ``src`` on ``dst`` (another path to the same folder, which
    resolving symbolic links does not reveal); unmounted at the end. Skips where the test
    cannot mount (not root, not Linux)."""
    mounted = []

    def bind(src, dst):
        os.makedirs(dst)
        try:
            res = subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True)
        except OSError:
            res = None
        if res is None or res.returncode != 0:
            pytest.skip("cannot bind-mount a folder here (needs root on Linux)")
        mounted.append(dst)

    yield bind
    for dst in reversed(mounted):
        subprocess.run(["umount", str(dst)], check=True)


def test_out_reaching_the_image_folder_through_a_bind_mount_is_refused(tmp_path, bind_mount):
    """A bind mount of the image folder is that folder under a path no symbolic link explains
    (so is another spelling on a case-insensitive file system): comparing resolved paths let
    all three layouts through, writing into the image folder. Refused before anything is
    written; an existing class folder reached that way stays allowed, as directly."""
    src = tmp_path / "images"
    for label, cls in enumerate(CLASSES):
        (src / cls).mkdir(parents=True)
        save(tiles()[label], src / cls / "a.png")
    bind_mount(src, tmp_path / "out" / SUITE)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for out, match in ((tmp_path / "out", "out must not be the folder that holds folder"),
                       (tmp_path / "out" / SUITE, "out must be another folder than folder"),
                       (tmp_path / "out" / SUITE / "results",
                        "out must not be a new folder inside folder")):
        with pytest.raises(ValueError, match=match):
            generate(SUITE, out, folder=src, workers=1, corruptions="pixelate")
        assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    res = generate(SUITE, tmp_path / "out" / SUITE / CLASSES[0], folder=src, workers=1,
                   corruptions="pixelate")
    assert res[0]["written"] == ["pixelate"]
    assert os.path.isfile(src / CLASSES[0] / SUITE / "pixelate.npz")


@pytest.mark.parametrize("folder", [None, 3, b"in"])
def test_folder_suite_rejects_non_paths(folder):
    with pytest.raises(TypeError, match="folder must be a str or os.PathLike folder path"):
        folder_suite(folder)


def test_folder_suite_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="image folder not found"):
        folder_suite(tmp_path / "missing")
    (tmp_path / "cls").mkdir()
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(tmp_path / "cls" / "a.png")
    with pytest.raises(ValueError, match="is not a folder"):
        folder_suite(tmp_path / "cls" / "a.png")
    # min side 170 px > 160 px (the midpoint of 96 and 224): the 224 px suite; (H, W) as stored
    Image.fromarray(np.zeros((200, 170), np.uint8)).save(tmp_path / "cls" / "a.png")
    assert folder_suite(tmp_path) == ("pathology224", (200, 170))


def test_non_square_gray_palette_and_alpha(tmp_path):
    """Any size (not --size), mode conversion by Pillow, a gray dataset, severity subsets."""
    base = skdata.immunohistochemistry()[:40, :56]
    src = tmp_path / "in" / "only"
    src.mkdir(parents=True)
    Image.fromarray(base).save(src / "a.png")
    Image.fromarray(np.dstack([base[::-1], np.full((40, 56), 128, np.uint8)])).save(src / "b.png")
    Image.fromarray(base).convert("P").save(src / "c.png")
    Image.fromarray(base[:, ::-1]).convert("L").save(src / "d.png")
    files = sorted(src.iterdir())
    assert folder_suite(tmp_path / "in") == ("pathology96", (40, 56))
    for dataset, mode in (("pathology", "RGB"), ("breastmnist", "L")):
        out = tmp_path / dataset
        res = generate(dataset, out, folder=tmp_path / "in", workers=1, seed=1,
                       corruptions="pixelate" if dataset == "breastmnist" else "hue,bubble",
                       severities="2,5")
        key = res[0]["dataset"]
        assert key == ("pathology96" if dataset == "pathology" else dataset)
        X = np.stack([np.asarray(Image.open(f).convert(mode)) for f in files])
        assert res[0]["manifest"]["size"] is None
        assert res[0]["manifest"]["input"]["image_shape"] == list(X.shape[1:])
        for c in res[0]["written"]:
            with np.load(out / key / f"{c}.npz") as z:
                imgs = z["test_images"]
                np.testing.assert_array_equal(z["test_labels"], np.zeros((8, 1), np.uint8))
            assert imgs.shape == (8,) + X.shape[1:]
            for k, s in enumerate((2, 5)):
                np.testing.assert_array_equal(imgs[4 * k:4 * k + 4],
                                              mf.corrupt_batch(X, c, s, dataset=key, seed=1))


def test_many_classes_int64_labels(tmp_path):
    img = np.full((8, 8, 3), 90, np.uint8)
    for k in range(257):
        (tmp_path / "in" / f"c{k:03d}").mkdir(parents=True)
        Image.fromarray(img).save(tmp_path / "in" / f"c{k:03d}" / "x.png")
    res = generate("pathology96", tmp_path / "out", folder=tmp_path / "in", workers=1,
                   corruptions="brightness", severities=[1])
    with np.load(os.path.join(res[0]["dir"], "brightness.npz")) as z:
        labs = z["test_labels"]
    assert labs.dtype == np.int64
    np.testing.assert_array_equal(labs[:, 0], np.arange(257))


# ------------------------------------------------------------------------------ bad folders
def _png16(path):
    Image.fromarray((np.arange(96 * 96, dtype=np.uint16) * 7).reshape(96, 96)).save(path)


def _rgb16_tiff(path):
    tifffile = pytest.importorskip("tifffile", reason="tifffile writes the 16-bit RGB TIFF")
    tifffile.imwrite(path, np.full((96, 96, 3), 40000, np.uint16))


def _truncated_png(path):
    buf = io.BytesIO()
    Image.fromarray(tiles()[5]).save(buf, format="PNG")
    path.write_bytes(buf.getvalue()[:len(buf.getvalue()) // 2])


GOOD = "a good second image"


def _bad_cases():
    """{name: ({relative path: writer, None (empty folder) or GOOD}, message regex)}.

    Each case starts from a folder holding one good image, ``a/x.png``.
    """
    good = tiles()[:2]
    return {
        "mixed_sizes": ({"t/b.png": lambda p: Image.fromarray(good[1][:64, :80]).save(p)},
                        r"t/b\.png is 64 x 80 px \(H x W\) but the first image, .*a/x\.png, "
                        r"is 96 x 96 px"),
        "empty_class": ({"t": None}, r"class folder .*/t holds no images"),
        "stray_file": ({"t/b.png": GOOD, "README.png": lambda p: p.write_bytes(b"x")},
                       r"README\.png is an image directly under the image folder; .* if "
                       r".* is one class's folder, pass its parent"),
        "png_16bit": ({"t/b.png": _png16},
                      r"t/b\.png: 'I;16' image with more than 8 bits per channel"),
        "tiff_rgb_16bit": ({"t/b.tif": _rgb16_tiff},
                           r"t/b\.tif: 'RGB' image with more than 8 bits per channel"),
        "not_an_image": ({"t/b.jpg": lambda p: p.write_bytes(b"not a jpeg")},
                         r"t/b\.jpg: not an image Pillow can read \(cannot identify image file\)$"),
        "truncated": ({"t/b.png": _truncated_png}, r"t/b\.png: cannot decode the image"),
        "tiny": ({"t/b.png": GOOD, "a/x.png": lambda p: Image.fromarray(good[0][:6]).save(p)},
                 r"a/x\.png is 6 x 96 px .*at least 8 x 8"),
        # was skipped with a warning calling it "not an image generate reads": the set lost
        # that row (and its label)
        "broken_link": ({"t/b.png": GOOD,
                         "t/c.png": lambda p: p.symlink_to(p.parent / "gone.png")},
                        r"t/c\.png is a broken symbolic link \(its target .*t/gone\.png does "
                        r"not exist\)"),
        # a class folder's broken link was skipped the same way: class 'b' vanished and the
        # labels of the classes after it shifted down by one
        "broken_class_link": ({"t/b.png": GOOD, "b": lambda p: p.symlink_to(p.parent / "mnt")},
                              r"in/b is a broken symbolic link \(its target .*/mnt does not "
                              r"exist\)"),
    }


@pytest.mark.parametrize("case", sorted(_bad_cases()))
def test_bad_folder_rejected_nothing_written(tmp_path, capsys, case):
    files, msg = _bad_cases()[case]
    root = tmp_path / "in"
    (root / "a").mkdir(parents=True)
    Image.fromarray(tiles()[0]).save(root / "a" / "x.png")
    for rel, write in files.items():
        p = root / rel
        if write is None:
            p.mkdir(parents=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        if write is GOOD:
            Image.fromarray(tiles()[1]).save(p)
        else:
            write(p)
    out = tmp_path / "out" / "nested"
    # "truncated" passes the header scan and fails when a worker process decodes it.
    code = main(["generate", "--dataset", SUITE, "--from-folder", str(root), "--out", str(out),
                 "--workers", "2" if case == "truncated" else "1", "--quiet"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("medmnistc-fast: error: ")
    assert re.search(msg, lines[0].replace(os.sep, "/")), lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, msg", [
    (["--dataset", SUITE, "--from-folder", "{tmp}/missing"], "image folder not found"),
    (["--dataset", SUITE, "--from-folder", "{tmp}/empty"], "has no class sub-folders"),
    (["--dataset", SUITE, "--from-folder", "{tmp}/empty", "--size", "96"],
     r"--size does not apply to --from-folder"),
    (["--dataset", "all", "--from-folder", "{tmp}/empty"], "take one dataset key"),
    (["--dataset", "pathology96", "--sample"], "pathology96 has no MedMNIST"),
    (["--dataset", "pathology", "--root", "{tmp}"], "pathology has no MedMNIST"),
    (["--dataset", SUITE, "--from-folder", "{tmp}/empty", "--corruptions", "gaussian_noise"],
     "'gaussian_noise' is not defined for dataset 'pathology96'"),
])
def test_folder_argument_errors(tmp_path, capsys, argv, msg):
    (tmp_path / "empty").mkdir()
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(["generate", *argv, "--out", str(tmp_path / "out"), "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(msg, err[0]), err
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------------ arrays
@pytest.fixture(scope="module")
def arrays():
    im = skdata.immunohistochemistry()
    X = np.stack([im[r:r + 100, c:c + 120] for r in (0, 150, 300) for c in (0, 200)])
    y = np.arange(6, dtype=np.int64) % 3
    return X, y


def test_arrays_input(arrays, tmp_path):
    X, y = arrays
    res = generate("pathology224", tmp_path / "a", images=X, labels=y, workers=1, seed=SEED,
                   corruptions="motion_blur,marking", chunk_size=4)
    d = res[0]["dir"]
    assert res[0]["written"] == ["motion_blur", "marking"]
    m = res[0]["manifest"]
    assert m["input"]["source"] == "arrays" and m["input"]["n"] == 6 and m["size"] is None
    for c in res[0]["written"]:
        with np.load(os.path.join(d, f"{c}.npz")) as z:
            np.testing.assert_array_equal(z["test_labels"], np.tile(y, 5)[:, None])  # (5N, 1)
            np.testing.assert_array_equal(z["test_images"], np.concatenate(
                [mf.corrupt_batch(X, c, s, dataset="pathology224", seed=SEED)
                 for s in range(1, 6)]))
    # Two workers, a memory-mapped copy: the same bytes; a re-run has nothing to do.
    mm = np.lib.format.open_memmap(tmp_path / "X.npy", mode="w+", dtype=np.uint8, shape=X.shape)
    mm[...] = X
    mm.flush()
    mm = np.load(tmp_path / "X.npy", mmap_mode="r")
    generate("pathology224", tmp_path / "b", images=mm, labels=y, workers=2, seed=SEED,
             corruptions="motion_blur,marking")
    del mm
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    again = generate("pathology224", tmp_path / "a", images=X, labels=y, workers=1, seed=SEED,
                     corruptions="motion_blur,marking")
    assert again[0]["written"] == [] and again[0]["skipped"] == ["motion_blur", "marking"]
    # "pathology" picks the suite from the size (100 x 120 -> 96 px tables).
    auto = generate("pathology", tmp_path / "c", images=X, labels=y, workers=1,
                    corruptions="hue", severities=[3])
    assert auto[0]["dataset"] == "pathology96"


def test_arrays_gray_medmnist(tmp_path):
    X = skdata.camera()[:64:2, :96:2][None].repeat(3, 0).copy()
    X[1] = 255 - X[1]
    y = np.eye(3, 14, dtype=np.uint8)
    res = generate("chestmnist", tmp_path, images=X, labels=y, workers=1, seed=2,
                   corruptions="gaussian_noise", severities="1,4", split="val")
    with np.load(os.path.join(res[0]["dir"], "gaussian_noise.npz")) as z:
        assert sorted(z.files) == ["val_images", "val_labels"]
        np.testing.assert_array_equal(z["val_labels"], np.tile(y, (2, 1)))
        np.testing.assert_array_equal(z["val_images"][3:], mf.corrupt_batch(
            X, "gaussian_noise", 4, dataset="chestmnist", seed=2))


@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"images": np.zeros((2, 16, 16, 3), np.float32)}, TypeError, "uint8"),
    ({"images": np.zeros((2, 16, 16), np.uint8)}, ValueError, r"RGB dataset: expected \(N"),
    ({"images": np.zeros((2, 4, 16, 3), np.uint8)}, ValueError, "at least 8 x 8"),
    ({"labels": np.zeros(3, np.int64)}, ValueError, "labels has shape"),
    ({"labels": np.zeros((2, 0), np.int64)}, ValueError, r"labels has shape \(2, 0\); .*L >= 1"),
    ({"labels": np.zeros(2, np.float64)}, TypeError, "integer"),
    ({"labels": None}, TypeError, "go together"),
    ({"size": 16}, ValueError, "does not apply"),
    ({"sample": True}, ValueError, "pass one input"),
    ({"dataset": "pathology96,pathology224"}, ValueError, "take one dataset key"),
])
def test_arrays_bad_arguments(tmp_path, kwargs, exc, msg):
    args = {"dataset": SUITE, "images": np.zeros((2, 16, 16, 3), np.uint8),
            "labels": np.zeros(2, np.int64), "workers": 1}
    args.update(kwargs)
    with pytest.raises(exc, match=msg):
        generate(args.pop("dataset"), tmp_path / "out", **args)
    assert not (tmp_path / "out").exists()


def test_overwrite_with_arrays_drops_stale_filenames(folder, reference, tmp_path):
    root, rows = folder
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    X = np.stack([r[2] for r in rows])[:3]
    res = generate(SUITE, out, images=X, labels=np.zeros(3, np.uint8), workers=1,
                   corruptions="pixelate", overwrite=True)
    assert res[0]["manifest"]["input"]["source"] == "arrays"
    assert not (out / SUITE / "filenames.json").exists()
    assert list(res[0]["manifest"]["files"]) == ["pixelate"]


def test_crc_of_written_members(reference):
    """The npz written from a folder is a valid zip (CRC-32 checked by zipfile)."""
    import zipfile

    with zipfile.ZipFile(reference / SUITE / "bubble.npz") as zf:
        assert zf.testzip() is None
        info = zf.getinfo("test_images.npy")
        with zf.open(info) as f:
            assert zlib.crc32(f.read()) == info.CRC
