"""Where a home's local Ray instance keeps its files (issue 22): engram's own directory, under RAY_TMPDIR when
the user set it, never Ray's shared `<tmp>/ray`; short enough for Ray's socket paths."""

from pathlib import Path

from engram.runtime.startup import MAX_TEMP_DIR_CHARS, private_ray_temp, temp_dir_for


def test_a_home_s_ray_files_go_under_ray_tmpdir_when_the_user_sets_it(monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_TMPDIR", "/tmp/rt1")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    path = temp_dir_for(Path("/home/u/.engram"))
    assert path.parent == Path("/tmp/rt1") and path.name.startswith("engram-")
    assert temp_dir_for(Path("/home/u/.engram")) == path  # stable per home
    assert temp_dir_for(Path("/home/u/other")) != path  # and one per home


def test_without_ray_tmpdir_the_system_temp_dir_is_used(monkeypatch):
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="t", dir="/tmp"))
    try:
        monkeypatch.delenv("RAY_TMPDIR", raising=False)
        monkeypatch.setenv("TMPDIR", str(short))
        monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
        assert temp_dir_for(Path("/home/u/.engram")).parent == short
    finally:
        short.rmdir()


def test_a_temp_dir_too_long_for_ray_s_sockets_falls_back_to_a_short_one_of_engram_s_own(monkeypatch):
    monkeypatch.setenv("RAY_TMPDIR", "/tmp/" + "x" * 40)
    path = temp_dir_for(Path("/home/u/.engram"))
    assert len(str(path)) <= MAX_TEMP_DIR_CHARS and path.parent == Path("/tmp") and path.name.startswith("engram-")


def test_a_private_ray_temp_dir_holds_the_cluster_address_file_ray_would_put_in_a_shared_one(monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_TMPDIR", raising=False)
    root = private_ray_temp(tmp_path / "mine")
    from ray._common.utils import get_ray_address_file

    assert Path(get_ray_address_file(None)) == tmp_path / "mine" / "ray" / "ray_current_cluster"
    assert (root / "ray").is_dir()


def test_a_home_s_ray_temp_dir_is_private_and_ray_s_own_world_writable_dir_sits_inside_it(monkeypatch, tmp_path):
    import os
    import stat

    from engram.runtime.startup import RAY_DIR, private_dir, ray_dir_for

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    root = temp_dir_for(Path("/home/u/.engram"))
    assert ray_dir_for(Path("/home/u/.engram")) == root / RAY_DIR
    old = os.umask(0o022)
    try:
        private_dir(root)
    finally:
        os.umask(old)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700 and root.stat().st_uid == os.getuid()
    root.chmod(0o777)  # as an older engram (or Ray itself) left it
    private_dir(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_a_ray_temp_dir_someone_else_made_at_engram_s_path_is_refused(tmp_path):
    import os

    import pytest

    from engram.runtime.startup import RayStartError, private_dir

    elsewhere = tmp_path / "theirs"
    elsewhere.mkdir()
    link = tmp_path / "engram-link"
    link.symlink_to(elsewhere)
    with pytest.raises(RayStartError, match="is not a directory \\(a symlink\\)"):
        private_dir(link)
    if os.getuid() != 0:
        pytest.skip("making a directory owned by another user needs root")
    foreign = tmp_path / "engram-foreign"
    foreign.mkdir(mode=0o777)
    os.chown(foreign, 65534, 65534)  # nobody
    with pytest.raises(RayStartError, match="belongs to another user \\(uid 65534\\)"):
        private_dir(foreign)
