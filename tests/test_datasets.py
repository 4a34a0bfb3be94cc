"""Loading generated corrupted sets (issue 4): npz (stored, memory-mapped; deflated), zarr."""
import copy
import io
import json
import os
import pickle
import threading
import zipfile

import numpy as np
import pytest

from medmnistc_fast import _npz
from medmnistc_fast.datasets import CorruptedSet, TorchCorruptedSet, available_corruptions

N = 4


def _data(rgb=True, size=12, labels=1, n=N, seed=0):
    g = np.random.default_rng(seed)
    shape = (5 * n, size, size) + ((3,) if rgb else ())
    images = g.integers(0, 256, shape, dtype=np.uint8)
    # Tag each row with its severity and sample index, to check the mapping.
    flat = images.reshape(5 * n, -1)
    flat[:, 0] = np.repeat(np.arange(1, 6), n)
    flat[:, 1] = np.tile(np.arange(n), 5)
    lab = np.tile(g.integers(0, 9, (n, labels), dtype=np.uint8), (5, 1))
    return images, lab


def _zarr_array(group, name, data, chunks=None):
    """An array in a zarr group, with zarr 3 (create_array) or zarr 2 (create_dataset)."""
    make = group.create_array if hasattr(group, "create_array") else group.create_dataset
    return make(name, data=data, **({} if chunks is None else {"chunks": chunks}))


def _write(root, dataset, corruption, images, labels, how="savez"):
    folder = root / dataset
    folder.mkdir(parents=True, exist_ok=True)
    if how == "zarr":
        zarr = pytest.importorskip("zarr")
        g = zarr.open_group(str(folder / f"{corruption}.zarr"), mode="w")
        _zarr_array(g, "test_images", images, (2,) + images.shape[1:])
        _zarr_array(g, "test_labels", labels)
        return folder / f"{corruption}.zarr"
    path = folder / f"{corruption}.npz"
    if how == "savez":
        np.savez(path, test_images=images, test_labels=labels)
    elif how == "compressed":
        np.savez_compressed(path, test_images=images, test_labels=labels)
    elif how == "zipfile_stored":
        with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
            for name, arr in (("test_labels", labels), ("test_images", images)):
                buf = io.BytesIO()
                np.lib.format.write_array(buf, arr, allow_pickle=False)
                zf.writestr(name + ".npy", buf.getvalue())
    elif how in ("writer_stored", "writer_deflated"):
        with open(path, "wb") as fh:
            w = _npz.NpzWriter(fh)
            w.add_array("test_images", images, compress=how == "writer_deflated")
            w.add_array("test_labels", labels, compress=how == "writer_deflated")
            w.close()
    (folder / "manifest.json").write_text(json.dumps({"dataset": dataset}))
    return path


HOWS = ["savez", "compressed", "zipfile_stored", "writer_stored", "writer_deflated", "zarr"]


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("rgb", [True, False])
def test_items_per_severity(tmp_path, how, rgb):
    images, labels = _data(rgb)
    _write(tmp_path, "pathmnist", "pixelate", images, labels, how)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate")
    assert len(cs) == 5 * N and cs.n_per_severity == N and cs.severities == (1, 2, 3, 4, 5)
    assert cs.image_shape == images.shape[1:]
    for i in range(len(cs)):
        img, lab = cs[i]
        assert np.array_equal(img, images[i]) and np.array_equal(lab, labels[i])
        assert img.flags.writeable and img.dtype == np.uint8
        assert cs.severity_of(i) == i // N + 1 == img.reshape(-1)[0]
        assert img.reshape(-1)[1] == i % N
    assert np.array_equal(cs[-1][0], images[-1])
    one = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=3)
    assert len(one) == N
    assert all(np.array_equal(one[j][0], images[2 * N + j]) for j in range(N))
    assert all(one.severity_of(j) == 3 for j in range(N))
    imgs, labs = one.arrays()
    assert np.array_equal(imgs, images[2 * N:3 * N]) and np.array_equal(labs, labels[2 * N:3 * N])
    if how in ("savez", "zipfile_stored", "writer_stored"):
        assert isinstance(imgs, np.memmap)  # stored members are mapped, not read
    two = cs.select([4, 2])
    assert two.severities == (4, 2) and len(two) == 2 * N
    imgs, _ = two.arrays()
    assert np.array_equal(imgs, np.concatenate([images[3 * N:4 * N], images[N:2 * N]]))
    assert [s for s in cs.per_severity()] == [1, 2, 3, 4, 5]
    assert cs.manifest == ({"dataset": "pathmnist"} if how != "zarr" else None)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("severity", [None, 3, [4, 2]])
def test_arrays_cannot_change_later_reads(tmp_path, how, severity):
    """arrays() of a compressed npz was a writable view of the member decompressed once per
    process: writing into it changed every later item and arrays() of the set. Each result is
    now read-only or a new array; either way the file's data read back is unchanged."""
    images, labels = _data(True)
    _write(tmp_path, "pathmnist", "pixelate", images, labels, how)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=severity)
    imgs, labs = cs.arrays()
    for arr in (imgs, labs):
        if arr.flags.writeable:
            arr[...] = 0  # a new array: the caller's to change
    levels = cs.severities
    want = np.concatenate([images[(s - 1) * N:s * N] for s in levels])
    assert np.array_equal(cs.arrays()[0], want)
    assert all(np.array_equal(cs[i][0], want[i]) for i in range(len(cs)))


def test_manifest_property_names_a_broken_file(tmp_path):
    """A truncated manifest.json raised json's bare "Expecting ..." message without the file."""
    images, labels = _data(True)
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate")
    mpath = tmp_path / "pathmnist" / "manifest.json"
    for broken in (b'{"dataset": "pathm', b"\xff\xfe{}"):
        mpath.write_bytes(broken)
        with pytest.raises(ValueError, match=r"pathmnist/manifest.json is not a valid JSON manifest"):
            cs.manifest
    mpath.write_text('{"dataset": "pathmnist"}')
    assert cs.manifest == {"dataset": "pathmnist"}


def test_labels_multilabel_and_1d(tmp_path):
    images, labels = _data(False, labels=14)
    _write(tmp_path, "chestmnist", "gaussian_noise", images, labels)
    cs = CorruptedSet(tmp_path, "chestmnist", "gaussian_noise", severity=5)
    assert cs[0][1].shape == (14,)
    _write(tmp_path, "chestmnist", "shot_noise", images, labels[:, 0])
    cs1 = CorruptedSet(tmp_path, "chestmnist", "shot_noise")
    assert cs1[N][1].shape == () and cs1[N][1] == labels[N, 0]


def test_from_path_and_available(tmp_path):
    images, labels = _data()
    p = _write(tmp_path, "dermamnist", "characters", images, labels)
    _write(tmp_path, "dermamnist", "pixelate", images, labels, "compressed")
    assert available_corruptions(tmp_path, "dermamnist") == ("pixelate", "characters")
    cs = CorruptedSet.from_path(p, severity=(1, 2))
    assert cs.dataset == "dermamnist" and cs.corruption == "characters" and len(cs) == 2 * N


def test_errors(tmp_path):
    images, labels = _data()
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    with pytest.raises(FileNotFoundError, match="present: pixelate"):
        CorruptedSet(tmp_path, "pathmnist", "bubble")
    with pytest.raises(ValueError, match="valid corruptions"):
        CorruptedSet(tmp_path, "pathmnist", "zoom_blur")
    with pytest.raises(ValueError, match="valid datasets"):
        CorruptedSet(tmp_path, "pathmnistx", "pixelate")
    for bad, exc in ((0, ValueError), (6, ValueError), (2.0, TypeError), ("3", TypeError),
                     ([], ValueError), ([1, 1], ValueError), (True, TypeError),
                     ({1, 2}, TypeError)):  # a set has no order
        with pytest.raises(exc, match="severity"):
            CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=bad)
    with pytest.raises(ValueError, match="format"):
        CorruptedSet(tmp_path, "pathmnist", "pixelate", format="hdf5")
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=2)
    with pytest.raises(IndexError, match=f"index {N} out of range"):
        cs[N]
    # the message names the index given, not the one shifted by len (it used to say -1)
    with pytest.raises(IndexError, match=f"index {-N - 1} out of range for a set of {N}"):
        cs[-N - 1]
    # the allowed indices in the TypeError too (it said only "must be an int")
    for bad in (1.0, True, "1"):
        with pytest.raises(TypeError, match=rf"index must be an int in {-N}\.\.{N - 1}; got"):
            cs[bad]
        with pytest.raises(TypeError, match=rf"index must be an int in {-N}\.\.{N - 1}"):
            cs.severity_of(bad)
    # Layout checks
    _write(tmp_path, "pathmnist", "bubble", images[:-1], labels[:-1])
    with pytest.raises(ValueError, match="multiple of 5"):
        CorruptedSet(tmp_path, "pathmnist", "bubble")
    _write(tmp_path, "pathmnist", "bubble", images, labels[:-5])
    with pytest.raises(ValueError, match="same kN rows"):
        CorruptedSet(tmp_path, "pathmnist", "bubble")
    _write(tmp_path, "pathmnist", "bubble", images.astype(np.float32), labels)
    with pytest.raises(ValueError, match="must be uint8"):
        CorruptedSet(tmp_path, "pathmnist", "bubble")
    np.savez(tmp_path / "pathmnist" / "saturate.npz", images=images, labels=labels)
    with pytest.raises(ValueError,
                       match="has no arrays test_images and test_labels; it has: .images."):
        CorruptedSet(tmp_path, "pathmnist", "saturate")


def test_wrong_kind_of_path(tmp_path):
    """A directory read as npz, a file read as zarr and a directory that is no zarr store are
    refused with a ValueError naming the path (they used to fail inside NumPy or zarr)."""
    images, labels = _data()
    p = _write(tmp_path, "pathmnist", "pixelate", images, labels)
    folder = tmp_path / "pathmnist" / "bubble.npz"
    folder.mkdir()
    with pytest.raises(ValueError, match="is a directory; format='npz'"):
        CorruptedSet.from_path(str(folder), format="npz")
    with pytest.raises(ValueError, match="without zarr group metadata"):
        CorruptedSet.from_path(str(folder))
    with pytest.raises(ValueError, match="is a file; format='zarr'"):
        CorruptedSet.from_path(str(p), format="zarr")


def test_object_arrays_refused(tmp_path):
    # Object images fail the uint8 check when the set is opened (the header is read, nothing is
    # unpickled). Object labels pass the shape checks, so only the loader's own guard stops them,
    # when the arrays are first read: a bare ValueError (as before) was satisfied by the uint8
    # check alone and left that guard untested.
    folder = tmp_path / "pathmnist"
    folder.mkdir()
    obj = np.empty(5, dtype=object)
    np.savez(folder / "pixelate.npz", test_images=obj, test_labels=obj)
    with pytest.raises(ValueError, match=r"test_images must be uint8 .*; got object \(5,\)$"):
        CorruptedSet(tmp_path, "pathmnist", "pixelate")
    images, _ = _data()
    labels = np.empty(len(images), dtype=object)
    labels[:] = [[i] for i in range(len(images))]
    np.savez(folder / "bubble.npz", test_images=images, test_labels=labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "bubble")
    for read in (lambda: cs[0], cs.arrays):
        with pytest.raises(ValueError, match=r"bubble\.npz: array 'test_labels' holds Python "
                                             r"objects; refusing to load it \(allow_pickle=False\)"):
            read()


def test_pickle_does_not_carry_data(tmp_path):
    images, labels = _data(size=64, n=20)
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=4)
    cs[0]  # opens the memory map
    blob = pickle.dumps(cs)
    assert len(blob) < 2000
    back = pickle.loads(blob)
    assert np.array_equal(back[3][0], images[3 * 20 + 3])


def test_files_not_modified(tmp_path):
    images, labels = _data()
    p = _write(tmp_path, "pathmnist", "pixelate", images, labels)
    before = p.read_bytes()
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate")
    img, _ = cs[0]
    img[:] = 0
    view, _ = cs.arrays()
    with pytest.raises(ValueError, match="read-only"):
        view[0, 0, 0, 0] = 1
    assert p.read_bytes() == before


@pytest.mark.parametrize("rgb", [True, False])
def test_torch_adapter(tmp_path, rgb):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, Dataset

    images, labels = _data(rgb, size=16)
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=2)
    tds = cs.torch()
    assert isinstance(tds, Dataset) and isinstance(tds, TorchCorruptedSet) and len(tds) == N
    img, lab = tds[1]
    assert img.dtype == torch.uint8 and tuple(img.shape) == ((3, 16, 16) if rgb else (1, 16, 16))
    assert lab.dtype == torch.int64 and tuple(lab.shape) == (1,)
    hwc = images[N + 1] if rgb else images[N + 1][..., None]
    assert np.array_equal(img.permute(1, 2, 0).numpy(), hwc)
    batches = list(DataLoader(tds, batch_size=3, num_workers=2))
    x = torch.cat([b[0] for b in batches]).numpy()
    assert np.array_equal(np.moveaxis(x, 1, -1).reshape(images[N:2 * N].shape), images[N:2 * N])
    assert torch.cat([b[1] for b in batches]).numpy().tolist() == labels[N:2 * N].tolist()
    # A transform receives PIL images, as MedMNIST's datasets do.
    seen = []

    def tf(im):
        seen.append((im.mode, im.size))
        return np.asarray(im, dtype=np.float32) / 255

    tds2 = TorchCorruptedSet(cs, transform=tf, target_transform=lambda y: int(y[0]))
    im, y = tds2[0]
    assert seen == [("RGB" if rgb else "L", (16, 16))] and y == labels[N, 0]
    assert im.shape == ((16, 16, 3) if rgb else (16, 16))


class _ScaledTorchSet(TorchCorruptedSet):
    """A user's subclass with its own constructor argument and attribute."""

    def __init__(self, corrupted, scale):
        super().__init__(corrupted)
        self.scale = scale

    def __getitem__(self, i):
        image, label = super().__getitem__(i)
        return image.float() * self.scale, label


def test_torch_adapter_subclass_is_a_dataset_and_pickles(tmp_path):
    # A subclass of TorchCorruptedSet was not a torch Dataset, and pickle (spawned DataLoader
    # workers) and deepcopy failed: "__new__() missing 1 required positional argument".
    torch = pytest.importorskip("torch")
    from torch.utils.data import ConcatDataset, Dataset

    images, labels = _data()
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=2)
    ds = _ScaledTorchSet(cs, 2.0)
    assert isinstance(ds, Dataset) and isinstance(ds, _ScaledTorchSet)
    assert isinstance(ds + cs.torch(), ConcatDataset)  # Dataset.__add__
    want = torch.from_numpy(np.moveaxis(images[N + 1], -1, 0).astype(np.float32) * 2)
    for back in (pickle.loads(pickle.dumps(ds)), copy.deepcopy(ds)):
        assert type(back) is type(ds) and back.scale == 2.0 and back.corrupted.severities == (2,)
        assert torch.equal(back[1][0], want)
        assert back[1][1].tolist() == labels[N + 1].tolist()
    assert repr(ds).startswith("_ScaledTorchSet(CorruptedSet(")


class _LockedTorchSet(TorchCorruptedSet):
    """A user's subclass holding a lock, which its __getstate__ drops and __setstate__ makes
    anew (pickle refuses locks)."""

    def __init__(self, corrupted):
        super().__init__(corrupted)
        self.lock = threading.Lock()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.lock = threading.Lock()


class _ReducedTorchSet(TorchCorruptedSet):
    """A user's subclass with its own __reduce__ (rebuilt from the CorruptedSet alone)."""

    def __reduce__(self):
        return (_ReducedTorchSet, (self.corrupted,))


def test_torch_adapter_subclass_pickling_hooks_are_used(tmp_path):
    # The adapter's pickling sent self.__dict__ (a subclass's __getstate__ was skipped: the
    # lock made pickle.dumps fail) and overrode a subclass's own __reduce__.
    pytest.importorskip("torch")
    images, labels = _data()
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=2)
    locked = _LockedTorchSet(cs)
    for back in (pickle.loads(pickle.dumps(locked)), copy.deepcopy(locked)):
        assert type(back) is type(locked) and back.lock is not locked.lock
        assert back.lock.acquire(blocking=False)
        assert np.array_equal(back[1][0].numpy(), np.moveaxis(images[N + 1], -1, 0))
    reduced = _ReducedTorchSet(cs)
    reduced.extra = "not in its __reduce__"
    back = pickle.loads(pickle.dumps(reduced))
    assert type(back) is type(reduced) and not hasattr(back, "extra")
    assert back.corrupted.severities == (2,)


def test_torch_adapter_repr(tmp_path):
    # It was object.__repr__ (an address); now it names the set and the transforms.
    pytest.importorskip("torch")
    images, labels = _data()
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=2)
    assert repr(cs.torch(transform=np.asarray)) == (
        f"TorchCorruptedSet({cs!r}, transform={np.asarray!r}, target_transform=None)")


def test_zero_d_integer_indices_as_in_torch_subset(tmp_path):
    # Subset(ds, torch.tensor([...])) indexes ds with 0-d tensors; CorruptedSet and its torch
    # adapter raised TypeError for them (AugmentedDataset accepted them).
    torch = pytest.importorskip("torch")
    from torch.utils.data import Subset

    images, labels = _data()
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=[3, 1])
    # item i is row stored_severities.index(level) * N + i % N, level severities[i // N]
    assert np.array_equal(cs[torch.tensor(N + 1)][0], images[0 * N + 1])
    assert np.array_equal(cs[np.array(-1)][0], images[N - 1])
    assert cs.severity_of(torch.tensor(0)) == 3
    sub = Subset(cs.torch(), torch.tensor([1, N + 2]))
    img, lab = sub[1]
    assert np.array_equal(img.permute(1, 2, 0).numpy(), images[2])
    assert lab.tolist() == labels[2].tolist()
    for bad in (torch.tensor(1.0), np.array(True), torch.tensor([1])):
        with pytest.raises(TypeError, match=rf"index must be an int in {-2 * N}\.\.{2 * N - 1}; got"):
            cs[bad]


def test_torch_adapter_pickles(tmp_path):
    pytest.importorskip("torch")
    images, labels = _data()
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    tds = CorruptedSet(tmp_path, "pathmnist", "pixelate").torch()
    back = pickle.loads(pickle.dumps(tds))
    assert type(back) is type(tds) and np.array_equal(back[7][0].numpy(), tds[7][0].numpy())


def test_zarr_v2_store(tmp_path):
    zarr = pytest.importorskip("zarr")
    images, labels = _data()
    folder = tmp_path / "pathmnist"
    folder.mkdir()
    v3 = int(zarr.__version__.split(".")[0]) >= 3  # zarr 2 writes format 2 only
    g = zarr.open_group(str(folder / "pixelate.zarr"), mode="w",
                        **({"zarr_format": 2} if v3 else {}))
    _zarr_array(g, "test_images", images, (1,) + images.shape[1:])
    _zarr_array(g, "test_labels", labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=[5])
    assert cs.format == "zarr" and np.array_equal(cs[N - 1][0], images[-1])
    assert os.path.isdir(cs.path)


def test_available_corruptions_missing_root(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        available_corruptions(tmp_path / "nope", "pathmnist")
    assert available_corruptions(tmp_path, "pathmnist") == ()


def test_dataset_folder_given_as_root_says_so(tmp_path):
    # A newcomer passes the folder of one dataset (holding manifest.json and the files) instead
    # of the generate output folder: available_corruptions used to return () without a word.
    _generated(tmp_path, "npz", None)
    inner = str(tmp_path / "pathmnist")
    hint = (f"{inner!r} holds a generate manifest, so it is a dataset folder itself: pass the "
            f"generate --out folder, which holds pathmnist/")
    with pytest.raises(FileNotFoundError) as ei:
        available_corruptions(inner, "pathmnist")
    assert str(ei.value) == f"no folder pathmnist/ under {inner!r}; {hint}"
    with pytest.raises(FileNotFoundError) as ei:
        CorruptedSet(inner, "pathmnist", "pixelate")
    assert str(ei.value).endswith("present: none; " + hint)
    # the right root: no hint, the set opens; a folder without any manifest: () as before
    assert available_corruptions(tmp_path, "pathmnist") == ("pixelate",)
    assert len(CorruptedSet(tmp_path, "pathmnist", "pixelate")) == 15
    assert available_corruptions(tmp_path, "dermamnist") == ()


def _generated(tmp_path, fmt, severities, n=3, seed=0, overwrite=False):
    """A generate output of ``n`` random 16 px RGB images (pixelate); returns (images, labels)."""
    from medmnistc_fast.generate import generate

    if fmt == "zarr":
        pytest.importorskip("zarr")
    g = np.random.default_rng(7)
    images = g.integers(0, 256, (n, 16, 16, 3), dtype=np.uint8)
    labels = g.integers(0, 9, (n, 1)).astype(np.int64)
    generate("pathmnist", tmp_path, images=images, labels=labels, corruptions=["pixelate"],
             severities=severities, seed=seed, fmt=fmt, workers=1, overwrite=overwrite)
    return images, labels


@pytest.mark.parametrize("fmt", ["npz", "zarr"])
def test_generated_severity_subset(tmp_path, fmt):
    # generate --severities 2,4 stores 2N rows; the loader reads the levels from the manifest
    # (npz) or the group attributes (zarr) instead of assuming five.
    import medmnistc_fast as mf

    images, labels = _generated(tmp_path, fmt, [4, 2])
    want = {s: mf.corrupt_batch(images, "pixelate", s, dataset="pathmnist", seed=0, start=0)
            for s in (2, 4)}
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate")
    assert cs.stored_severities == (2, 4) and cs.severities == (2, 4)
    assert cs.n_per_severity == 3 and len(cs) == 6
    for i in range(6):
        s = (2, 4)[i // 3]
        img, lab = cs[i]
        assert cs.severity_of(i) == s
        assert np.array_equal(img, want[s][i % 3]) and np.array_equal(lab, labels[i % 3])
    four = cs.select(4)
    assert len(four) == 3 and np.array_equal(four.arrays()[0], want[4])
    assert np.array_equal(CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=[4, 2])
                          .arrays()[0], np.concatenate([want[4], want[2]]))
    for bad in (1, [2, 3], 5):
        with pytest.raises(ValueError, match="levels stored in this file: 2, 4"):
            cs.select(bad)


def test_auto_format_follows_the_manifest(tmp_path):
    # An --overwrite run in zarr leaves the npz of the earlier run on disk; "auto" must read
    # the file the manifest lists (seed 5), not the stale npz (seed 0).
    import medmnistc_fast as mf

    _generated(tmp_path, "npz", None, seed=0)
    images, _ = _generated(tmp_path, "zarr", None, seed=5, overwrite=True)
    assert os.path.exists(tmp_path / "pathmnist" / "pixelate.npz")
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=3)
    assert cs.format == "zarr"
    want = mf.corrupt_batch(images, "pixelate", 3, dataset="pathmnist", seed=5, start=0)
    assert np.array_equal(cs.arrays()[0], want)
    # The stale npz (seed 0, not in the manifest) is refused by name, even when asked for;
    # from_path opens it knowingly.
    with pytest.raises(ValueError, match=r"pixelate\.npz is not listed in .*manifest\.json"):
        CorruptedSet(tmp_path, "pathmnist", "pixelate", format="npz")
    stale = CorruptedSet.from_path(tmp_path / "pathmnist" / "pixelate.npz", severity=3)
    want0 = mf.corrupt_batch(images, "pixelate", 3, dataset="pathmnist", seed=0, start=0)
    assert stale.format == "npz" and np.array_equal(stale.arrays()[0], want0)


def test_file_left_by_an_earlier_run_is_refused(tmp_path):
    # generate pixelate and bubble, then --overwrite with pixelate only: bubble.npz stays on
    # disk but the manifest no longer lists it (its seed is not the manifest's).
    from medmnistc_fast.generate import generate

    g = np.random.default_rng(8)
    images = g.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    labels = g.integers(0, 9, (3, 1)).astype(np.int64)
    out = tmp_path / "out"
    generate("pathmnist", out, images=images, labels=labels, corruptions=["pixelate", "bubble"],
             seed=1, workers=1)
    generate("pathmnist", out, images=images, labels=labels, corruptions=["pixelate"], seed=2,
             workers=1, overwrite=True)
    assert (out / "pathmnist" / "bubble.npz").exists()
    assert available_corruptions(out, "pathmnist") == ("pixelate",)
    with pytest.raises(ValueError, match="bubble.npz is not listed in"):
        CorruptedSet(out, "pathmnist", "bubble")
    assert len(CorruptedSet(out, "pathmnist", "pixelate")) == 5 * 3


def test_available_lists_what_corruptedset_opens(tmp_path):
    # npz run, then a zarr --overwrite run: the manifest names pixelate.zarr; with that store
    # deleted by hand only the stale npz remains, which CorruptedSet refuses, so
    # available_corruptions must not list pixelate either.
    import shutil

    _generated(tmp_path, "npz", None, seed=0)
    _generated(tmp_path, "zarr", None, seed=5, overwrite=True)
    assert available_corruptions(tmp_path, "pathmnist") == ("pixelate",)
    shutil.rmtree(tmp_path / "pathmnist" / "pixelate.zarr")
    assert available_corruptions(tmp_path, "pathmnist") == ()
    with pytest.raises(ValueError, match="not listed in"):
        CorruptedSet(tmp_path, "pathmnist", "pixelate")


@pytest.mark.parametrize("root", [None, 3, b"folder"])
def test_bad_root_type(tmp_path, root):
    with pytest.raises(TypeError, match="root must be a str or os.PathLike"):
        CorruptedSet(root, "pathmnist", "pixelate")
    with pytest.raises(TypeError, match="root must be a str or os.PathLike"):
        available_corruptions(root, "pathmnist")
    with pytest.raises(TypeError, match="path must be a str or os.PathLike"):
        CorruptedSet.from_path(root)


def test_manifest_entry_of_another_file_is_ignored(tmp_path):
    # The file was replaced by a five-level one (10 rows) after a --severities 2,4 run of
    # N = 2 (4 rows): the manifest's levels no longer describe it, so all five are assumed.
    _generated(tmp_path, "npz", [2, 4], n=2)
    images, labels = _data(n=2)
    np.savez(tmp_path / "pathmnist" / "pixelate.npz", test_images=images, test_labels=labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate")
    assert cs.stored_severities == (1, 2, 3, 4, 5) and cs.n_per_severity == 2
    assert np.array_equal(cs.select(4).arrays()[0], images[6:8])


@pytest.mark.parametrize("fmt", ["npz", "zarr"])
def test_val_and_train_split_files(tmp_path, fmt):
    # generate --split val / train writes val_images / val_labels (train_...): the loader reads
    # the file's own split, or the one asked for.
    images, labels = _data()
    folder = tmp_path / "pathmnist"
    folder.mkdir()
    path = folder / f"pixelate.{fmt}"
    if fmt == "zarr":
        zarr = pytest.importorskip("zarr")
        g = zarr.open_group(str(path), mode="w")
        _zarr_array(g, "val_images", images, (2,) + images.shape[1:])
        _zarr_array(g, "val_labels", labels)
    else:
        np.savez(path, val_images=images, val_labels=labels)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate")
    assert cs.split == "val" and len(cs) == 5 * N and "split='val'" in repr(cs)
    assert np.array_equal(cs[3 * N + 1][0], images[3 * N + 1])
    assert np.array_equal(CorruptedSet.from_path(path, split="val")[0][1], labels[0])
    with pytest.raises(ValueError, match="has no arrays test_images and test_labels"):
        CorruptedSet(tmp_path, "pathmnist", "pixelate", split="test")
    with pytest.raises(ValueError, match="split must be one of 'test', 'val', 'train'"):
        CorruptedSet(tmp_path, "pathmnist", "pixelate", split="valid")
    with pytest.raises(TypeError, match="split must be a str"):
        CorruptedSet(tmp_path, "pathmnist", "pixelate", split=1)


def test_several_splits_in_one_file(tmp_path):
    # "test" when present; otherwise the caller must say which.
    images, labels = _data()
    folder = tmp_path / "pathmnist"
    folder.mkdir()
    np.savez(folder / "pixelate.npz", test_images=images, test_labels=labels,
             train_images=images[::-1], train_labels=labels[::-1])
    np.savez(folder / "bubble.npz", val_images=images, val_labels=labels,
             train_images=images[::-1], train_labels=labels[::-1])
    assert CorruptedSet(tmp_path, "pathmnist", "pixelate").split == "test"
    tr = CorruptedSet.from_path(folder / "pixelate.npz", split="train")
    assert np.array_equal(tr[0][0], images[-1])
    with pytest.raises(ValueError, match=r"pass split='val'"):
        CorruptedSet(tmp_path, "pathmnist", "bubble")
    assert CorruptedSet.from_path(folder / "bubble.npz", split="train").split == "train"


def test_generated_val_split_reads_back(tmp_path):
    # The loader reads what generate writes for --split val (arrays input, tiny images).
    from medmnistc_fast.generate import generate

    g = np.random.default_rng(3)
    imgs = g.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    labs = g.integers(0, 9, (3, 1))
    generate("pathmnist", tmp_path, images=imgs, labels=labs, split="val",
             corruptions=["pixelate"], workers=1)
    assert available_corruptions(tmp_path, "pathmnist", "val") == ("pixelate",)
    assert available_corruptions(tmp_path, "pathmnist") == ()  # pathmnist/ (test) is empty
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", split="val")  # in pathmnist_val/
    assert cs.split == "val" and cs.n_per_severity == 3
    assert np.array_equal(cs[2 * 3][1], labs[0])
    with pytest.raises(FileNotFoundError, match="pathmnist/pixelate.npz") as ei:
        CorruptedSet(tmp_path, "pathmnist", "pixelate")  # the test split's folder
    # the message names the split that holds the set (it said only "present: none")
    assert str(ei.value).endswith("present: none; pathmnist_val/ holds pixelate: pass "
                                  "split='val'")
    with pytest.raises(FileNotFoundError) as ei:
        CorruptedSet(tmp_path, "pathmnist", "pixelate", split="train")
    assert str(ei.value).endswith("; pathmnist_val/ holds pixelate: pass split='val'")
    with pytest.raises(FileNotFoundError) as ei:   # another corruption: no such hint
        CorruptedSet(tmp_path, "pathmnist", "bubble")
    assert "pass split=" not in str(ei.value)


def test_another_tools_manifest_lists_nothing(tmp_path):
    # A manifest.json written by another tool, with a "files" mapping of its own, is not a
    # generate manifest (no generator "medmnistc_fast"): the files beside it open, are listed,
    # and hold all five levels (it used to refuse every file as "not listed").
    images, labels = _data()
    _write(tmp_path, "pathmnist", "pixelate", images, labels)
    foreign = {"files": {"pixelate.npz": {"bytes": 1234, "severities": [2]}},
               "tool": "my-archiver"}
    (tmp_path / "pathmnist" / "manifest.json").write_text(json.dumps(foreign))
    assert available_corruptions(tmp_path, "pathmnist") == ("pixelate",)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate")
    assert cs.stored_severities == (1, 2, 3, 4, 5) and len(cs) == 5 * N
    assert np.array_equal(cs.arrays()[0], images)


def test_available_lists_the_manifest_files_only(tmp_path):
    # An --overwrite run with other parameters leaves the earlier run's other files on disk;
    # listing them would mix seeds in one evaluation loop.
    from medmnistc_fast.generate import generate

    g = np.random.default_rng(4)
    imgs = g.integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    labs = g.integers(0, 9, (2, 1))
    kw = dict(images=imgs, labels=labs, workers=1)
    generate("pathmnist", tmp_path, corruptions=["pixelate", "bubble"], seed=0, **kw)
    assert available_corruptions(tmp_path, "pathmnist") == ("pixelate", "bubble")
    generate("pathmnist", tmp_path, corruptions=["bubble"], seed=5, overwrite=True, **kw)
    assert (tmp_path / "pathmnist" / "pixelate.npz").exists()  # kept, not listed
    assert available_corruptions(tmp_path, "pathmnist") == ("bubble",)


def test_home_folder_paths_as_generate_writes_them(tmp_path, monkeypatch):
    # generate expands "~" in out= (and root=): generate(..., "~/mc") writes $HOME/mc. The
    # same "~/mc" given to CorruptedSet, available_corruptions and from_path was taken
    # literally: "no corrupted set ... under '~/mc'".
    from medmnistc_fast.generate import generate
    from medmnistc_fast.sample import sample_split

    monkeypatch.setenv("HOME", str(tmp_path))
    generate("breastmnist", "~/mc", sample=True, sample_n=3, size=16, severities=[2],
             corruptions=["pixelate", "contrast_down"], workers=1)
    assert os.path.isfile(tmp_path / "mc" / "breastmnist" / "pixelate.npz")
    assert available_corruptions("~/mc", "breastmnist") == ("pixelate", "contrast_down")
    y = sample_split("breastmnist", 16, 3)["test_labels"]
    for s in (CorruptedSet("~/mc", "breastmnist", "pixelate"),
              CorruptedSet.from_path("~/mc/breastmnist/contrast_down.npz")):
        assert s.stored_severities == (2,) and len(s) == 3
        assert s.path.startswith(str(tmp_path))
        np.testing.assert_array_equal(s.arrays()[1], y)


def test_moved_subset_file_with_stored_severities(tmp_path):
    # An npz written with --severities 1,3 does not record its levels itself (the manifest of
    # its folder does): copied elsewhere it reads as five levels of 4 rows (what a file of the
    # reference would be) unless stored_severities says which levels it holds.
    import shutil

    images, labels = _generated(tmp_path / "run", "npz", [1, 3], n=10)
    src = tmp_path / "run" / "pathmnist" / "pixelate.npz"
    moved = tmp_path / "elsewhere" / "pixelate.npz"
    moved.parent.mkdir()
    shutil.copy(src, moved)
    assert CorruptedSet.from_path(moved).stored_severities == (1, 2, 3, 4, 5)
    # 2 levels of 6 rows: 12 rows are no five levels, and the message says what to pass.
    _generated(tmp_path / "run6", "npz", [2, 4], n=6)
    moved6 = tmp_path / "elsewhere" / "six.npz"
    shutil.copy(tmp_path / "run6" / "pathmnist" / "pixelate.npz", moved6)
    with pytest.raises(ValueError, match=r"multiple of 5 .*stored_severities="):
        CorruptedSet.from_path(moved6)
    assert len(CorruptedSet.from_path(moved6, stored_severities=[2, 4])) == 12
    cs = CorruptedSet.from_path(moved, stored_severities=[1, 3], severity=3)
    ref = CorruptedSet.from_path(src, severity=3)
    assert (cs.stored_severities, cs.n_per_severity, len(cs)) == ((1, 3), 10, 10)
    for i in (0, 9):
        np.testing.assert_array_equal(cs[i][0], ref[i][0])
        assert cs[i][1].tolist() == ref[i][1].tolist()
    # Where the levels are recorded, the given ones must agree.
    assert CorruptedSet.from_path(src, stored_severities=(1, 3)).stored_severities == (1, 3)
    with pytest.raises(ValueError, match=r"recorded as \(1, 3\)"):
        CorruptedSet.from_path(src, stored_severities=(1, 2))
    with pytest.raises(ValueError, match="multiple of 3"):
        CorruptedSet.from_path(moved, stored_severities=(1, 2, 4))
    for bad, exc in [((3, 1), ValueError), ((0, 1), ValueError), ("13", TypeError),
                     ((1.0, 3), TypeError), (3, TypeError)]:
        with pytest.raises(exc, match="stored_severities"):
            CorruptedSet.from_path(moved, stored_severities=bad)


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("levels", [[1, 3], [2, 4, 5], [1, 5]])
def test_arrays_of_increasing_levels_with_gaps(tmp_path, how, levels):
    """arrays() of a selection of stored levels in increasing order but not contiguous: only
    those levels' rows (a slice from the first to the last selected level also took the levels
    between them: len(arrays()) != len(set); mutation check, only [4, 2] and single levels
    were tested)."""
    images, labels = _data(True)
    _write(tmp_path, "pathmnist", "pixelate", images, labels, how)
    cs = CorruptedSet(tmp_path, "pathmnist", "pixelate", severity=levels)
    imgs, labs = cs.arrays()
    rows = np.concatenate([np.arange((s - 1) * N, s * N) for s in levels])
    assert len(cs) == len(rows) == imgs.shape[0] == labs.shape[0]
    np.testing.assert_array_equal(imgs, images[rows])
    np.testing.assert_array_equal(labs, labels[rows])
    # the severity tag written into each row (see _data)
    assert imgs.reshape(len(rows), -1)[:, 0].tolist() == np.repeat(levels, N).tolist()
