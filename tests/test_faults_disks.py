"""Fault class: downloads and the disks they land on (issue 31, items 5 and 7).

A server that sends more than the pinned file is cut off at the manifest's size (exit 2 naming it), not read until
the deadline; a folder on another filesystem (a mount point, a symlink to another disk) is filled by renames on its
own filesystem; a move that fails half-way (disk full, cross-device) leaves the folder as it was or completes by
copying; a full or read-only disk is exit 2 with the cause and the fix. Real filesystems where this machine allows
it: a tmpfs of a few kB mounted in the test (root only; skipped with the reason otherwise).
"""

from __future__ import annotations

import errno
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

import circuitdev.sources.fetch as fetch
from circuitdev.cli import main
from circuitdev.sources.fetch import is_complete, read_manifest, staging_dir
from loopback_mirror import snapshot


@contextmanager
def tmpfs(where: Path, size: str, *options: str):
    """A tmpfs of `size` mounted at `where` for the block (root only: the test is skipped with the reason)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; this test runs as another user")
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join([f"size={size}", *options]), "tmpfs", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); a container without CAP_SYS_ADMIN?")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def test_an_endless_body_is_cut_off_at_the_pinned_size(mirror, tmp_path, capsys):
    victim = mirror.local_paths[0]
    size = next(n for local, _, n, _ in mirror.entries if local == victim)
    mirror.faults[victim] = "endless"
    dest = tmp_path / "pub"
    assert main(["published", "fetch", "--to", str(dest), "--timeout", "60"]) == 2
    err = capsys.readouterr().err
    assert f"more than the pinned {size} bytes" in err and "too slow" not in err
    assert snapshot(dest) == {}


def test_a_swap_that_fails_half_way_puts_the_folder_back(mirror, tmp_path, monkeypatch, capsys):
    dest = tmp_path / "pub"
    dest.mkdir()
    (dest / "README.md").write_text("mine\n")
    first = dest / mirror.local_paths[0]  # a manifest file with other content: kept aside, then put back
    first.parent.mkdir(parents=True, exist_ok=True)
    first.write_text("my edited copy\n")
    before = snapshot(dest)
    real, moved = os.replace, []

    def disk_full_on_the_third(src, dst):
        if ".staging" in str(src) and str(dst).startswith(str(dest)):
            moved.append(dst)
            if len(moved) == 3:
                raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", disk_full_on_the_third)
    assert main(["published", "fetch", "--to", str(dest)]) == 2
    err = capsys.readouterr().err
    assert "the folder is as it was" in err and "Free space" in err and "please report" not in err
    monkeypatch.setattr(os, "replace", real)
    assert snapshot(dest) == before
    assert not staging_dir(dest).exists()


def test_a_move_across_filesystems_is_a_copy_then_a_rename(mirror, tmp_path, monkeypatch, capsys):
    dest = tmp_path / "pub"
    real = os.replace

    def cross_device(src, dst):
        if ".staging" in str(src) and str(dst).startswith(str(dest)):
            raise OSError(errno.EXDEV, "Invalid cross-device link", str(src), None, str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", cross_device)
    assert main(["published", "fetch", "--to", str(dest)]) == 0
    assert is_complete(dest, manifest=read_manifest())
    assert not list(dest.rglob("*.tmp")) and not staging_dir(dest).exists()


def test_a_published_folder_that_is_a_mount_point_is_filled(mirror, tmp_path, capsys):
    dest = tmp_path / "pub"
    with tmpfs(dest, "1m"):
        assert staging_dir(dest) == dest / fetch.STAGING_INSIDE
        assert main(["published", "fetch", "--to", str(dest)]) == 0, capsys.readouterr().err
        assert is_complete(dest, manifest=read_manifest())
        assert not (dest / fetch.STAGING_INSIDE).exists()


def test_a_published_folder_symlinked_to_another_disk_is_filled(mirror, tmp_path, capsys):
    disk = tmp_path / "disk"
    with tmpfs(disk, "1m"):
        (disk / "real").mkdir()
        link = tmp_path / "pub"
        link.symlink_to(disk / "real")
        assert staging_dir(link).parent == disk
        assert main(["published", "fetch", "--to", str(link)]) == 0, capsys.readouterr().err
        assert is_complete(disk / "real", manifest=read_manifest())


def test_a_full_disk_is_exit_2_with_the_fix_and_the_folder_unchanged(mirror, tmp_path, capsys):
    disk = tmp_path / "disk"
    with tmpfs(disk, "16k"):  # the fixture is ~36 kB (16 files): the disk fills while staging
        dest = disk / "pub"
        dest.mkdir()
        (dest / "README.md").write_text("mine\n")
        before = snapshot(dest)
        assert main(["published", "fetch", "--to", str(dest)]) == 2
        err = capsys.readouterr().err
        assert "No space left on device" in err and "Free space on the disk" in err and "please report" not in err
        assert snapshot(dest) == before and not staging_dir(dest).exists()


def test_a_read_only_disk_is_exit_2_with_the_fix(mirror, tmp_path, make_tiny_panel, capsys):
    disk = tmp_path / "disk"
    with tmpfs(disk, "1m", "ro"):
        assert main(["published", "fetch", "--to", str(disk / "pub")]) == 2
        err = capsys.readouterr().err
        assert "read-only" in err.lower() and "please report" not in err
        path = make_tiny_panel(revisions=1, name="tiny-ro")
        assert main(["probe", "--panel", str(path), "--out", str(disk / "results"), "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "read-only" in err and "choose a writable folder" in err.lower()


def test_a_path_too_long_is_exit_2(tmp_path, make_tiny_panel, capsys):
    path = make_tiny_panel(revisions=1, name="tiny-long")
    out = tmp_path / ("x" * 300)
    assert main(["probe", "--panel", str(path), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "too long" in err and "please report" not in err


def test_a_redirect_loop_is_not_called_a_reason_to_try_again_later(mirror, tmp_path, capsys):
    mirror.faults[mirror.local_paths[0]] = "loop"
    assert main(["published", "fetch", "--to", str(tmp_path / "pub"), "--timeout", "60"]) == 2
    err = capsys.readouterr().err
    assert "redirects in a loop" in err and "try again later" not in err


def test_a_local_copy_of_another_size_is_refused_before_it_is_read(mirror, tmp_path, capsys):
    source = tmp_path / "copy"
    for local in mirror.local_paths:
        (source / local).parent.mkdir(parents=True, exist_ok=True)
        (source / local).write_bytes((mirror.files / local).read_bytes())
    victim = source / mirror.local_paths[0]
    victim.write_bytes(victim.read_bytes() * 3)  # another version of the file
    dest = tmp_path / "pub"
    assert main(["published", "fetch", "--to", str(dest), "--from", str(source)]) == 2
    err = capsys.readouterr().err
    assert f"where the manifest pins {(mirror.files / mirror.local_paths[0]).stat().st_size}" in err
    assert snapshot(dest) == {}


def test_a_workshop_folder_blocked_by_a_file_is_exit_2(tmp_path, capsys):
    out = tmp_path / "workshop"
    out.mkdir()
    (out / "student").write_text("a file where the student notebooks go\n")
    assert main(["workshop", "build", "--out", str(out), "--no-execute"]) == 2
    err = capsys.readouterr().err
    assert "student" in err and "please report" not in err
    assert (out / "student").read_text() == "a file where the student notebooks go\n"
