"""Which mount shows a location, read from a mountinfo text as the kernel writes it."""

from __future__ import annotations

import pytest

from pathguard import mounts as m

TABLE = """\
1 0 8:1 / / rw - ext4 /dev/sda1 rw
2 1 8:1 /srv/work /work rw - ext4 /dev/sda1 rw
3 2 0:5 / /work/sub rw - tmpfs tmpfs rw
4 1 0:6 / /work rw - tmpfs tmpfs rw
5 1 8:1 /a\\040b /x\\040y rw - ext4 /dev/sda1 rw
6 1 8:1 /home/dana/proj/hooks /opt/alias rw - ext4 /dev/sda1 rw
"""


@pytest.mark.parametrize(("location", "mount_id", "fs_path"), [
    ("/", 1, "/"),
    ("/etc/passwd", 1, "/etc/passwd"),
    ("/workshop", 1, "/workshop"),  # a prefix of the text is not a folder above
    ("/work", 4, "/"),  # mounted later over /work: it hides the bind and what is in it
    ("/work/sub/f", 4, "/sub/f"),
    ("/x y/z", 5, "/a b/z"),  # \\040 is a space
    ("/opt/alias/check.sh", 6, "/home/dana/proj/hooks/check.sh"),
])
def test_the_mount_that_shows_a_location(location: str, mount_id: int, fs_path: str) -> None:
    place = m.Mounts(m.parse(TABLE)).place(location)
    assert place is not None
    assert (place.mount.id, place.fs_path) == (mount_id, fs_path)


def test_a_bind_of_a_folder_inside_the_project_is_the_project() -> None:
    table = m.Mounts(m.parse(TABLE))
    project, alias = table.place("/home/dana/proj"), table.place("/opt/alias/check.sh")
    assert project is not None and alias is not None
    assert m.same_or_inside(alias, project) == "hooks/check.sh"
    assert m.same_or_inside(project, project) == ""
    assert m.same_or_inside(project, project, strict=True) is None
    other = table.place("/work/x")
    assert other is not None and m.same_or_inside(other, project) is None


def test_a_line_that_does_not_parse_is_an_error() -> None:
    with pytest.raises(m.MountsUnreadable):
        m.parse("not a mountinfo line\n")
