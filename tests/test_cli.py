"""The ``medmnistc-fast`` console command: generate, preview, list; errors; interrupted runs."""
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

import medmnistc_fast as mf
from medmnistc_fast.cli import main
from medmnistc_fast.generate import input_path
from medmnistc_fast.sample import sample_split


def tree(root):
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            p = os.path.join(d, name)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = hashlib.sha256(f.read()).hexdigest()
    return out


def run_cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "medmnistc_fast.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------------------------- generate
def test_generate_sample_quickstart(tmp_path, capsys):
    out = tmp_path / "medmnistc_sample"
    assert main(["generate", "--sample", "--dataset", "pathmnist", "--size", "28",
                 "--out", str(out), "--workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "pathmnist: wrote 11 file(s)" in err
    X = sample_split("pathmnist", 28, 30)["test_images"]
    for c in mf.corruptions("pathmnist"):
        with np.load(out / "pathmnist" / f"{c}.npz", allow_pickle=False) as z:
            imgs, labs = z["test_images"], z["test_labels"]
        assert imgs.shape == (150, 28, 28, 3) and imgs.dtype == np.uint8
        assert labs.shape == (150, 1)
        np.testing.assert_array_equal(imgs[60:90], mf.corrupt_batch(X, c, 3, dataset="pathmnist",
                                                                    seed=0))
    # a second run resumes: nothing to do
    assert main(["generate", "--sample", "--dataset", "pathmnist", "--size", "28",
                 "--out", str(out), "--workers", "1"]) == 0
    assert "wrote 0 file(s), 11 already complete" in capsys.readouterr().err


def test_skipped_dataset_is_one_warning_line(tmp_path, capsys):
    """A dataset without any of the requested corruptions is named on one warning line (no
    Python file / source context), even with --quiet, and the run still succeeds."""
    assert main(["generate", "--sample", "--sample-n", "2", "--dataset", "pathmnist,octmnist",
                 "--size", "28", "--out", str(tmp_path), "--workers", "1", "--quiet",
                 "--corruptions", "bubble"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["medmnistc-fast: warning: octmnist: none of the requested corruptions apply "
                   "(bubble); skipped"]
    assert (tmp_path / "pathmnist" / "bubble.npz").exists()
    assert not (tmp_path / "octmnist").exists()


def test_quiet_prints_nothing(tmp_path, capsys):
    assert main(["generate", "--sample", "--sample-n", "4", "--dataset", "breastmnist",
                 "--size", "28", "--out", str(tmp_path), "--workers", "1", "--quiet",
                 "--corruptions", "pixelate", "--severities", "5"]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""
    with np.load(tmp_path / "breastmnist" / "pixelate.npz") as z:
        assert z["test_images"].shape == (4, 28, 28)


@pytest.fixture(scope="module")
def gray_root(tmp_path_factory):
    r = tmp_path_factory.mktemp("root")
    np.savez(input_path(r, "chestmnist", 64), **sample_split("chestmnist", 64, 200))
    return r


def test_interrupted_run_resumes_to_identical_bytes(gray_root, tmp_path):
    args = ["generate", "--dataset", "chestmnist", "--root", str(gray_root), "--size", "64",
            "--workers", "1", "--chunk-size", "50", "--seed", "3", "--quiet"]
    full = tmp_path / "full"
    assert main(args + ["--out", str(full)]) == 0

    out = tmp_path / "killed"
    d = out / "chestmnist"
    proc = subprocess.Popen([sys.executable, "-m", "medmnistc_fast.cli", *args, "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        first = d / "pixelate.npz"
        while not first.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.002)
        while (proc.poll() is None and time.monotonic() < deadline
               and not any(n.endswith(".tmp") for n in os.listdir(d))):
            time.sleep(0.002)
        assert proc.poll() is None, "the run finished before it could be interrupted"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=60)

    names = os.listdir(d)
    finals = [n for n in names if n.endswith(".npz")]
    assert any(n.endswith(".tmp") for n in names)
    assert 1 <= len(finals) < len(mf.corruptions("chestmnist"))
    for n in finals:  # whatever has a final name is complete
        with np.load(d / n, allow_pickle=False) as z:
            assert z["test_images"].shape == (1000, 64, 64)

    assert main(args + ["--out", str(out)]) == 0
    assert not [n for n in os.listdir(d) if n.endswith(".tmp")]
    assert tree(out) == tree(full)


def _children(pid):
    """PIDs whose parent is ``pid`` (from /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(entry))
    return kids


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid):
    """PIDs of every process below ``pid`` (fork server, resource tracker, pool workers)."""
    out, todo = [], [pid]
    while todo:
        kids = _children(todo.pop())
        out += kids
        todo += kids
    return out


def _start_generate_pool(args, out, **popen):
    """``medmnistc-fast`` with ``args --out out`` in a subprocess, returned once its pool runs
    (fork server, resource tracker and workers started) and the dataset's manifest exists, so
    that a signal sent now interrupts a run with workers in it."""
    proc = subprocess.Popen([sys.executable, "-m", "medmnistc_fast.cli", *args, "--out", str(out)],
                            **popen)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if (len(_descendants(proc.pid)) >= 3
                and (out / "chestmnist" / "manifest.json").exists()):
            break
        time.sleep(0.005)
    if proc.poll() is not None:
        proc.communicate()
        raise AssertionError("the run finished before it could be interrupted")
    return proc


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to list worker processes")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_run_leaves_no_workers_and_resumes(gray_root, tmp_path, sig):
    """kill -TERM on the parent (what batch schedulers send) shuts the worker pool down and exits
    130; kill -9 cannot be handled, and the pool workers (children of the fork server) notice
    their parent is gone and exit. Either way no process outlives the run, and a re-run
    completes to the bytes of an uninterrupted run."""
    args = ["generate", "--dataset", "chestmnist", "--root", str(gray_root), "--size", "64",
            "--workers", "2", "--chunk-size", "20", "--seed", "5", "--quiet"]
    full = tmp_path / "full"
    assert main(args + ["--out", str(full)]) == 0
    out = tmp_path / "killed"
    # stderr to a file, not a pipe: after kill -9 the fork server and workers still hold it
    # until they notice, and reading a pipe to its end would wait for them.
    errfile = open(tmp_path / "stderr.txt", "w")
    proc = _start_generate_pool(args, out, stdout=subprocess.DEVNULL, stderr=errfile)
    try:
        below = _descendants(proc.pid)
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        errfile.close()
    err = (tmp_path / "stderr.txt").read_text()
    if sig == signal.SIGTERM:
        assert proc.returncode == 130, err
        assert "interrupted" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 30
    while any(_alive(k) for k in below) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [k for k in below if _alive(k)]
    for k in left:  # do not leave them behind if the assertion fails
        os.kill(k, signal.SIGKILL)
    assert not left, "processes outlived the interrupted run"
    assert main(args + ["--out", str(out)]) == 0
    assert tree(out) == tree(full)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to list worker processes")
def test_workers_exit_while_the_killed_parent_is_not_yet_reaped(gray_root, tmp_path):
    """After kill -9 the parent stays a zombie until whoever started it waits for it, and
    os.kill(pid, 0) still finds a zombie. Callers that read the output to its end before
    waiting (``proc.kill(); proc.communicate()``, the cleanup the subprocess docs show) waited
    for ever: the workers, believing their parent alive, kept the inherited pipes open (and
    kept taking queued tasks). They must exit without the parent being reaped."""
    args = ["generate", "--dataset", "chestmnist", "--root", str(gray_root), "--size", "64",
            "--workers", "2", "--chunk-size", "20", "--seed", "5", "--quiet"]
    out = tmp_path / "killed"
    proc = _start_generate_pool(args, out, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    below = []
    try:
        below = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)   # not reaped: proc.poll()/wait() would reap it
        deadline = time.monotonic() + 20
        while any(_alive(k) for k in below) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [k for k in below if _alive(k)]
        assert not left, "workers outlived their killed (unreaped) parent"
        proc.communicate(timeout=30)   # every copy of the pipes closed: no wait for ever
    finally:
        for k in below:
            if _alive(k):
                os.kill(k, signal.SIGKILL)
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL


def test_list_into_a_closed_pipe_is_quiet(capsys):
    # "No Broken pipe, no Traceback" alone also passes when the command does not run at all
    # (e.g. python -m finds nothing to execute): the reader must get the start of the listing
    # and stderr must stay empty. `head` meets the writer's second buffered flush, which depends
    # on stdio buffering; the broken pipe is also forced deterministically by closing the read
    # end before the child (still importing) writes anything.
    assert main(["list"]) == 0
    listing = capsys.readouterr().out
    proc = subprocess.run(f"{sys.executable} -m medmnistc_fast.cli list | head -c 10",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert proc.stdout == listing[:10] and proc.stderr == ""
    child = subprocess.Popen([sys.executable, "-m", "medmnistc_fast.cli", "list"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()
    err = child.stderr.read().decode()
    child.stderr.close()
    assert child.wait(timeout=120) == 0 and err == "", err


def _failing_run(capsys, out, command="generate"):
    """``medmnistc-fast COMMAND --sample ... --out OUT --quiet`` with ``generate`` (and
    ``load_images``) patched by the caller to fail: (exit status, stderr lines)."""
    code = main([command, "--sample", "--dataset", "breastmnist", "--size", "28",
                 "--out", str(out), "--quiet"])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("command", ["generate", "preview"])
def test_broken_pipe_outside_list_is_an_error(tmp_path, capsys, monkeypatch, command):
    # A BrokenPipeError inside generate / preview (a dead multiprocessing helper, stderr closed
    # under the progress bars) must not pass for `list | head`: the run did not complete.
    import medmnistc_fast.generate as G

    def broken(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(G, "generate", broken)
    monkeypatch.setattr(G, "load_images", broken)
    code, lines = _failing_run(capsys, tmp_path / ("o" if command == "generate" else "o.png"),
                               command)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("medmnistc-fast: error: ")
    assert "Broken pipe" in lines[0]


def test_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    # A MemoryError (an input too large for memory) printed a whole traceback.
    import medmnistc_fast.generate as G

    def too_big(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(G, "generate", too_big)
    code, lines = _failing_run(capsys, tmp_path / "o")
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("medmnistc-fast: error: out of memory")
    assert "--chunk-size" in lines[0]


def test_dead_worker_is_one_line(tmp_path, capsys, monkeypatch):
    # A pool worker killed under a CLI run (out of memory, say) ended in a traceback.
    import medmnistc_fast.generate as G

    def worker_died(*args, **kwargs):
        raise G.WorkerDiedError("a worker process of generate died (killed)")

    monkeypatch.setattr(G, "generate", worker_died)
    code, lines = _failing_run(capsys, tmp_path / "o")
    assert code == 1
    assert lines == ["medmnistc-fast: error: a worker process of generate died (killed)"]


def test_empty_list_items_are_rejected(tmp_path):
    r = run_cli("generate", "--sample", "--dataset", "breastmnist", "--size", "28",
                "--severities", "1,,3", "--out", str(tmp_path / "o"), "--quiet")
    assert r.returncode == 2 and "severities" in r.stderr and "empty" in r.stderr
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").rglob("*.npz"))


# ----------------------------------------------------------------------------------- bad input
def _write_truncated(path):
    np.savez_compressed(path, **sample_split("chestmnist", 28, 5))
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _write_float(path):
    d = sample_split("chestmnist", 28, 5)
    d["test_images"] = d["test_images"].astype(np.float64)
    np.savez(path, **d)


def _write_missing_key(path):
    d = sample_split("chestmnist", 28, 5)
    del d["test_labels"]
    np.savez(path, **d)


@pytest.mark.parametrize("extra, write, msg", [
    ([], None, r"MedMNIST\+ file not found: .*chestmnist.npz"),
    ([], _write_truncated, "not a valid .npz file"),
    ([], _write_float, "dtype float64; expected uint8"),
    ([], _write_missing_key, "no array 'test_labels'"),
    (["--corruptions", "bubble"], "good", "'bubble' is not defined for dataset 'chestmnist'"),
    (["--severities", "6"], "good", r"severities must hold ints in 1..5; got 6"),
])
def test_bad_inputs_exit_2_one_line(tmp_path, capsys, extra, write, msg):
    root = tmp_path / "root"
    root.mkdir()
    path = input_path(root, "chestmnist", 28)
    if write == "good":
        np.savez(path, **sample_split("chestmnist", 28, 5))
    elif write is not None:
        write(path)
    out = tmp_path / "out"
    code = main(["generate", "--dataset", "chestmnist", "--root", str(root), "--size", "28",
                 "--out", str(out), "--workers", "1", *extra])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("medmnistc-fast: error: ")
    assert re.search(msg, lines[0]), lines[0]
    assert not out.exists()


def test_uncreatable_out_is_named(tmp_path, capsys):
    """An --out that cannot be created (here: under a regular file) is one error line naming
    the folder and the --out given; the message used to give only the OS error."""
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder")
    out = blocker / "out"
    code = main(["generate", "--sample", "--sample-n", "2", "--dataset", "pathmnist",
                 "--corruptions", "pixelate", "--out", str(out), "--workers", "1", "-q"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert "cannot create the output folder" in lines[0]
    assert f"out={str(out)!r}" in lines[0]
    assert blocker.read_text() == "not a folder"


def test_missing_file_message_and_no_traceback(tmp_path):
    r = run_cli("generate", "--dataset", "octmnist", "--root", str(tmp_path), "--size", "64",
                "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert str(tmp_path / "octmnist_64.npz") in r.stderr
    assert "python -m medmnist download --size=64" in r.stderr and "--sample" in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, msg", [
    (["generate", "--dataset", "mnist", "--sample", "--out", "x"],
     r"^medmnistc-fast: error: unknown dataset 'mnist'; valid datasets: 'pathmnist', .*"
     r"'organsmnist', 'all'; an image folder \(--from-folder, folder=\) or arrays \(images=\) "
     r"also take 'pathology96', 'pathology224', 'pathology'$"),
    (["generate", "--dataset", "octmnist", "--sample", "--root", "r", "--out", "x"],
     r"generate: error: argument --root: not allowed with argument --sample$"),
    (["generate", "--dataset", "octmnist", "--sample", "--out", "x", "--workers", "0"],
     r"generate: error: argument --workers: expected an integer in 1\.\.1024; got '0'$"),
    # the upper bound too, in the same words (it used to pass argparse and fail later)
    (["generate", "--dataset", "octmnist", "--sample", "--out", "x", "--workers", "1025"],
     r"generate: error: argument --workers: expected an integer in 1\.\.1024; got '1025'$"),
    # decimal ASCII digits only: int() read "1_0" as 10 and Arabic-Indic three as 3
    (["generate", "--dataset", "octmnist", "--sample", "--out", "x", "--seed", "1_0"],
     r"generate: error: argument --seed: expected an integer >= 0; got '1_0'$"),
    (["generate", "--dataset", "octmnist", "--sample", "--out", "x", "--workers", "\u0663"],
     r"generate: error: argument --workers: expected an integer in 1\.\.1024; got '\u0663'$"),
    # past Python's 4300-digit int-string limit: int()'s ValueError leaked out as argparse's
    # "invalid parse value" (the type function's name)
    (["generate", "--dataset", "octmnist", "--sample", "--out", "x", "--seed", "7" * 4301],
     r"generate: error: argument --seed: expected an integer >= 0; got '7{4301}'$"),
    (["generate", "--dataset", "octmnist", "--sample", "--out", "x", "--chunk-size", "+4"],
     r"generate: error: argument --chunk-size: expected a positive integer; got '\+4'$"),
    (["generate", "--dataset", "octmnist", "--sample", "--out", "x", "--format", "hdf5"],
     r"generate: error: argument --format: invalid choice: 'hdf5'"),
    (["preview", "--dataset", "octmnist", "--sample", "--out", "x.jpg"],
     r"^medmnistc-fast: error: --out must name a \.png file; got 'x\.jpg'$"),
    (["preview", "--dataset", "pathology96", "--sample", "--out", "x.png"],
     r"^medmnistc-fast: error: pathology96 has no MedMNIST\+ files or sample"),
    (["generate", "--dataset", "pathology96", "--from-folder", "f", "--sample", "--out", "x"],
     r"generate: error: argument --sample: not allowed with argument --from-folder$"),
    (["generate", "--dataset", "pathology96", "--from-folder", "f", "--root", "r", "--out", "x"],
     r"generate: error: argument --root: not allowed with argument --from-folder$"),
    (["generate", "--dataset", "pathology96", "--from-folder", "f", "--out", "x"],
     r"^medmnistc-fast: error: image folder not found: .*f$"),
    (["generate", "--dataset", "pathology", "--from-folder", "f", "--out", "x"],
     r"^medmnistc-fast: error: image folder not found: .*f$"),
    (["list", "--dataset", "mnist"],
     r"^medmnistc-fast: error: unknown dataset 'mnist'; valid datasets: 'pathmnist', "),
    # preview has no --from-folder: its message must not send the user there
    (["preview", "--sample", "--dataset", "pathology96", "--out", "x.png"],
     r"^medmnistc-fast: error: pathology96 has no MedMNIST\+ files or sample to preview; "
     r"[^-]*render_preview\(image, 'pathology96'\)"),
    (["list", "--dataset", "pathology"],
     r"^medmnistc-fast: error: unknown dataset 'pathology'; valid datasets: .*'pathology224'$"),
    ([], r"error: the following arguments are required: COMMAND$"),
    # the sample's test split has 30 images: the message said "index out of range", no flag
    (["preview", "--dataset", "octmnist", "--sample", "--size", "28", "--index", "30",
      "--out", "x.png"],
     r"^medmnistc-fast: error: --index must be below 30: the test split of octmnist has 30 "
     r"images \(0\.\.29\); got 30$"),
    # checks made by generate itself name the flag, not the Python parameter
    (["generate", "--dataset", "pathmnist", "--sample", "--size", "5", "--out", "x"],
     r"^medmnistc-fast: error: --size must be an int in 8\.\.4096; got 5$"),
    # both ends of the sample's range in the same words (7 said ">= 8", 5000 "in 8..4096")
    (["generate", "--dataset", "pathmnist", "--sample", "--size", "5000", "--out", "x"],
     r"^medmnistc-fast: error: --size must be an int in 8\.\.4096; got 5000$"),
    # without --sample no upper bound applies here (a size without MedMNIST+ files names the
    # missing file instead)
    (["generate", "--dataset", "pathmnist", "--size", "5", "--out", "x"],
     r"^medmnistc-fast: error: --size must be an int >= 8; got 5$"),
    (["generate", "--dataset", "pathmnist", "--sample", "--severities", "0,6", "--out", "x"],
     r"^medmnistc-fast: error: --severities must hold ints in 1\.\.5; got 0$"),
    # an empty path is not the working directory: --from-folder "" scanned the folder the
    # command ran in ("class folder .../benchmarks holds no images"), --root "" read from it
    (["generate", "--dataset", "pathology96", "--from-folder", "", "--out", "x"],
     r"^medmnistc-fast: error: --from-folder must name a folder; got '' \(use '\.' for the "),
    (["generate", "--dataset", "pathology", "--from-folder", "", "--out", "x"],
     r"^medmnistc-fast: error: --from-folder must name a folder; got ''"),
    (["generate", "--dataset", "pathmnist", "--root", "", "--out", "x"],
     r"^medmnistc-fast: error: --root must name a folder; got ''"),
    (["preview", "--dataset", "pathmnist", "--root", "", "--out", "x.png"],
     r"^medmnistc-fast: error: --root must name a folder; got ''"),
    # the sample's 4 GiB bound: preview's message said "n" and neither named the flag
    (["generate", "--dataset", "pathmnist", "--sample", "--sample-n", "100000", "--out", "x"],
     r"^medmnistc-fast: error: --sample-n must be at most 28532 for 224 x 224 px RGB images "),
    (["preview", "--dataset", "pathmnist", "--sample", "--sample-n", "100000", "--out", "x.png"],
     r"^medmnistc-fast: error: --sample-n must be at most 28532 for 224 x 224 px RGB images "),
    # --sample-n without --sample was ignored: every image of the --root file was processed
    (["generate", "--dataset", "pathmnist", "--root", ".", "--sample-n", "5", "--out", "x"],
     r"^medmnistc-fast: error: --sample-n applies only to --sample .*got --sample-n 5 without"),
    (["generate", "--dataset", "pathology96", "--from-folder", ".", "--sample-n", "5", "--out",
      "x"], r"^medmnistc-fast: error: --sample-n applies only to --sample"),
    (["preview", "--dataset", "pathmnist", "--root", ".", "--sample-n", "5", "--out", "x.png"],
     r"^medmnistc-fast: error: --sample-n applies only to --sample"),
])
def test_usage_errors(tmp_path, capsys, argv, msg, monkeypatch):
    # Exit status 2 alone does not say which check fired (argparse and every validation use it):
    # the last stderr line must be the expected message.
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert re.search(msg, err.strip().splitlines()[-1]), err
    assert not os.path.exists(tmp_path / "x")


def test_help_and_version(capsys):
    assert main(["--help"]) == 0
    assert main(["--version"]) == 0
    assert mf.__version__ in capsys.readouterr().out


def test_sample_n_help_states_the_real_default(capsys):
    # The parser keeps its imports lazy, so --sample-n's help writes the default out: it must
    # be the sample's images per split.
    from medmnistc_fast.sample import SPLIT_IMAGES

    assert main(["generate", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"images per split of the sample (default {SPLIT_IMAGES})" in help_text


def test_preview_help_mentions_only_its_own_options(capsys):
    # preview has no --from-folder: its --size help must not refer to it.
    assert main(["preview", "--help"]) == 0
    assert "--from-folder" not in capsys.readouterr().out
    assert main(["generate", "--help"]) == 0
    assert "not used with --from-folder" in capsys.readouterr().out


# -------------------------------------------------------------------------------------- preview
@pytest.mark.parametrize("dataset, size", [("dermamnist", 28), ("octmnist", 64)])
def test_preview_png(tmp_path, capsys, dataset, size):
    out = tmp_path / "sub" / "grid.png"
    assert main(["preview", "--sample", "--dataset", dataset, "--size", str(size),
                 "--index", "2", "--out", str(out)]) == 0
    rows = len(mf.corruptions(dataset))
    cell = size * -(-96 // size)
    with Image.open(out) as im:
        assert im.format == "PNG" and im.mode == "RGB"
        assert im.size == (120 + 6 * (cell + 4) + 4, 20 + rows * (cell + 4) + 4)
        arr = np.asarray(im)
    assert f"({im.size[0]} x {im.size[1]} px)" in capsys.readouterr().err
    # the clean column shows the sample image itself (enlarged by nearest neighbour)
    clean = sample_split(dataset, size, 30)["test_images"][2]
    f = cell // size
    y0, x0 = 20 + 4, 120 + 4
    shown = arr[y0:y0 + cell:f, x0:x0 + cell:f]
    want = clean if clean.ndim == 3 else np.repeat(clean[..., None], 3, axis=2)
    np.testing.assert_array_equal(shown, want)


# ----------------------------------------------------------------------------------------- list
def test_list_json(capsys):
    assert main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["version"] == mf.__version__
    assert list(data["datasets"]) == list(mf.DATASETS) + list(mf.PATHOLOGY_SUITES)
    for d, info in data["datasets"].items():
        assert list(info["corruptions"]) == list(mf.corruptions(d))
        assert info["channels"] == (3 if mf.registry.RGB[d] else 1)
        assert info["reference_size"] == mf.registry.REFERENCE_SIZES[d]
        pathology = d in mf.PATHOLOGY_SUITES
        assert info["suite"] == ("pathology" if pathology else "medmnistc")
        assert info["task"] == (None if pathology else mf.registry.TASKS[d])
        for c, ci in info["corruptions"].items():
            assert ci["table"] == json.loads(json.dumps(list(mf.severity_table(d, c))))
            own = mf.registry.PATHOLOGY_FOLDS if pathology and c not in sum(
                mf.FOLDS.values(), ()) else mf.FOLDS
            assert c in own[ci["fold"]]
    assert main(["list", "--json", "--dataset", "retinamnist"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert list(one["datasets"]) == ["retinamnist"]
    assert one["datasets"]["retinamnist"]["corruptions"]["defocus_blur"]["table"][0] == [4, 0.1]
    assert main(["list", "--json", "--dataset", "pathology224"]) == 0
    suite = json.loads(capsys.readouterr().out)["datasets"]["pathology224"]
    assert suite["reference_size"] == 224
    assert suite["corruptions"]["motion_blur"]["table"] == [[10, 3], [15, 5], [15, 8], [15, 12],
                                                            [20, 15]]


def test_list_text(capsys):
    assert main(["list", "--dataset", "dermamnist"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dermamnist  (RGB, multi-class, 15 corruptions)")
    assert "zoom_blur" in out and "[12 zooms 1..1.11]" in out
    assert main(["list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "pathology96  (RGB, pathology suite, tables for 96 px, 9 corruptions)" in out
    assert "pathology224  (RGB, pathology suite, tables for 224 px, 9 corruptions)" in out
    assert "  hue               color          0.02, 0.04, 0.06, 0.08, 0.1" in out
    assert "  marking           task-specific  (24, 26), (49, 53), (75, 80), (101, 107), (126, 135)" in out



def test_out_dataset_folder_blocked_by_a_file(tmp_path, capsys):
    # {out}/{flag} exists as a regular file: the message says so (it said "File exists").
    (tmp_path / "pathmnist").write_text("x")
    code = main(["generate", "--sample", "--sample-n", "2", "--dataset", "pathmnist",
                 "--corruptions", "pixelate", "--out", str(tmp_path), "--workers", "1", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "a file of that name is in the way" in err
    assert (tmp_path / "pathmnist").read_text() == "x"


@pytest.mark.parametrize("where, why", [
    ("folder.png", "it is a folder"),                       # --out names an existing folder
    ("blocker/x.png", "'{b}' is a file, not a folder"),      # its folder is a regular file
    ("blocker/a/x.png", "'{b}' is a file, not a folder"),
])
def test_preview_unwritable_out_is_named(tmp_path, capsys, where, why):
    # The message names --out and the reason; the OS's own named the temporary .partial file.
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "blocker").write_text("x")
    out = tmp_path / where
    code = main(["preview", "--dataset", "pathmnist", "--sample", "--out", str(out), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"cannot write --out {str(out)!r}: " + why.format(b=tmp_path / "blocker") in err[0]
    assert ".partial" not in err[0] and (tmp_path / "blocker").read_text() == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "folder.png"]


def test_python_dash_m_package_runs_the_command(tmp_path):
    # `python -m medmnistc_fast ...` used to fail: "No module named medmnistc_fast.__main__".
    # With 2 workers: the pool's processes import the main module (here the package's
    # __main__) and must not run the command again.
    r = subprocess.run([sys.executable, "-m", "medmnistc_fast", "--version"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"medmnistc-fast {mf.__version__}"
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "medmnistc_fast", "generate", "--sample",
                        "--sample-n", "3", "--size", "16", "--dataset", "breastmnist",
                        "--corruptions", "pixelate,contrast_down", "--severities", "2",
                        "--workers", "2", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "breastmnist: wrote 2 file(s)" in r.stderr
    X = sample_split("breastmnist", 16, 3)["test_images"]
    for c in ("pixelate", "contrast_down"):
        with np.load(out / "breastmnist" / f"{c}.npz", allow_pickle=False) as z:
            np.testing.assert_array_equal(
                z["test_images"], mf.corrupt_batch(X, c, 2, dataset="breastmnist", seed=0))


def test_dask_workers_on_other_versions_are_one_line(tmp_path, capsys, monkeypatch):
    # The cluster check's error (workers on another medmnistc_fast or library version) was a
    # traceback with exit status 1; it is a setup problem like a bad argument: one line, 2.
    import medmnistc_fast.generate as G

    mine = G._worker_environment()
    other = dict(mine, medmnistc_fast="0.0.1")
    with pytest.raises(G.DaskEnvironmentError, match="0.0.1"):
        G._DaskRunner._check_workers({"tcp://10.0.0.1:1": mine, "tcp://10.0.0.2:1": other})
    G._DaskRunner._check_workers({"tcp://10.0.0.1:1": mine})  # the same versions pass

    def check(*args, **kwargs):
        G._DaskRunner._check_workers({"tcp://10.0.0.2:1": other})

    monkeypatch.setattr(G, "generate", check)
    code, lines = _failing_run(capsys, tmp_path / "o")
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("medmnistc-fast: error: ")
    assert "tcp://10.0.0.2:1" in lines[0]

    def bug(*args, **kwargs):
        raise RuntimeError("an internal error")

    monkeypatch.setattr(G, "generate", bug)
    with pytest.raises(RuntimeError, match="internal"):  # other RuntimeErrors are not hidden
        main(["generate", "--sample", "--dataset", "breastmnist", "--out", str(tmp_path / "p")])


@pytest.mark.parametrize("command, argv, advice", [
    ("generate", ["generate", "--sample", "--dataset", "pathmnist", "--out", "x"], True),
    ("preview", ["preview", "--sample", "--dataset", "pathmnist", "--out", "x.png"], False),
    ("list", ["list"], False)])
def test_ctrl_c_advises_resuming_only_generate(command, argv, advice, monkeypatch, capsys):
    # preview and list keep nothing to resume; they used to say "re-run ... to resume" too.
    from medmnistc_fast import cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, f"_cmd_{command}", interrupted)
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and ("resume" in err) == advice, err


def test_preview_cells_equal_the_generate_rows_of_that_index_and_seed(tmp_path):
    # --seed's help: "with --index, the cells equal the rows of that image in a generate
    # output of the same seed". preview passing index 0 to render_preview instead of --index
    # passed every test (mutation check): none compared a corrupted cell.
    gen = tmp_path / "gen"
    assert main(["generate", "--sample", "--dataset", "dermamnist", "--size", "28",
                 "--corruptions", "gaussian_noise", "--seed", "5", "--out", str(gen),
                 "--workers", "1", "-q"]) == 0
    with np.load(gen / "dermamnist" / "gaussian_noise.npz", allow_pickle=False) as z:
        rows = z["test_images"]
    n = rows.shape[0] // 5
    out = tmp_path / "grid.png"
    assert main(["preview", "--sample", "--dataset", "dermamnist", "--size", "28", "--index",
                 "2", "--seed", "5", "--corruptions", "gaussian_noise", "--out", str(out),
                 "-q"]) == 0
    with Image.open(out) as im:
        arr = np.asarray(im)
    cell = 28 * -(-96 // 28)
    f = cell // 28
    y0 = 20 + 4
    for s in range(1, 6):
        x0 = 120 + 4 + s * (cell + 4)
        np.testing.assert_array_equal(arr[y0:y0 + cell:f, x0:x0 + cell:f],
                                      rows[(s - 1) * n + 2], err_msg=f"severity {s}")


def test_generate_split_flag_selects_the_split(tmp_path):
    # --split val writes {flag}_val/ with val_images / val_labels from the val split; the flag
    # was not passed on to generate() without any test failing (mutation check).
    assert main(["generate", "--sample", "--sample-n", "3", "--dataset", "breastmnist",
                 "--size", "28", "--split", "val", "--out", str(tmp_path), "--workers", "1",
                 "-q", "--corruptions", "pixelate", "--severities", "2"]) == 0
    assert not (tmp_path / "breastmnist").exists()
    d = sample_split("breastmnist", 28, 3)
    with np.load(tmp_path / "breastmnist_val" / "pixelate.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["val_images", "val_labels"]
        np.testing.assert_array_equal(z["val_images"], mf.corrupt_batch(
            d["val_images"], "pixelate", 2, dataset="breastmnist"))
        np.testing.assert_array_equal(z["val_labels"], d["val_labels"])
    with open(tmp_path / "breastmnist_val" / "manifest.json", encoding="utf-8") as f:
        assert json.load(f)["split"] == "val"
