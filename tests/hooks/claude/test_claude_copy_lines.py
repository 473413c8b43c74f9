"""The copy lines ``import claude`` prints work as printed, whatever the file names hold,
and carry nothing raw to the terminal."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from launchers.claude.files import Move, move_commands, shell_word


@pytest.mark.skipif(shutil.which("bash") is None, reason="the lines are for bash and zsh")
@pytest.mark.parametrize("name", ["plain.sh", "with space.sh", "it's.sh",
                                  "esc\x1b[2J.sh", "clip\x1b]52;c;SGk=\x07.sh", "new\nline.sh",
                                  "bidi\u202e.sh", "back\\slash.sh"])
def test_a_copy_line_copies_the_file_it_names(tmp_path: Path, name: str) -> None:
    src = tmp_path / "from" / name
    src.parent.mkdir()
    src.write_text("#!/bin/sh\n")
    target = tmp_path / "to dir" / name
    lines = move_commands([Move(str(src), str(target), "in the project")])
    for line in lines:
        assert line.isprintable(), line
    subprocess.run(["bash", "-c", "\n".join(lines)], check=True)
    assert target.read_text() == "#!/bin/sh\n"


def test_an_undecodable_byte_is_written_as_that_byte(tmp_path: Path) -> None:
    raw = os.fsencode(str(tmp_path)) + b"/x\xff.sh"
    with open(raw, "w") as f:
        f.write("x")
    word = shell_word(os.fsdecode(raw))
    assert word.isprintable()
    out = subprocess.run(["bash", "-c", f"cat {word}"], capture_output=True, check=True)
    assert out.stdout == b"x"
