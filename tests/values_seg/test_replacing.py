"""checked_files.replacing: a reader sees the old version or the new one, never a temporary file."""

import pytest

from values_seg.checked_files import replacing


@pytest.mark.parametrize("fault", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path, fault):
    target = tmp_path / "table.csv"
    target.write_text("old")
    with pytest.raises(type(fault)):
        with replacing(target) as tmp:
            tmp.write_text("half")
            raise fault
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_folder_is_written_whole_or_not_at_all(tmp_path):
    target = tmp_path / "evaluation"
    with pytest.raises(KeyboardInterrupt):
        with replacing(target) as tmp:
            tmp.mkdir()
            (tmp / "part.npz").write_bytes(b"x")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with replacing(target) as tmp:
        tmp.mkdir()
        (tmp / "done.json").write_text("{}")
    assert [p.name for p in tmp_path.iterdir()] == ["evaluation"] and (target / "done.json").exists()
