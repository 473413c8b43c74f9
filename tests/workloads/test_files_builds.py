"""Builds, archives, text tools and file work: bare and boxed alike; and what the box
refuses on purpose (writes outside the project, other owners for root), said."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from helpers.workloads import USER, Workload, cases

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bwrap box"),
]

OUTSIDE = "the box writes only in the project, /tmp and [sandbox] writable"
# Root's stand-in in the box gives another owner an id of a range no account on the
# host has; a plain user cannot give files away, bare or boxed.
STANDIN = ("root's stand-in maps uid 1234 to an id of a range no account on the host has"
           if USER == "root" else "")
# What the session's end says of them (sandbox/session/watched.py).
STANDIN_SAID = "ids no account on this host has" if USER == "root" else None
WORKLOADS = [
    Workload("make-builds-and-cleans",
             "make -s && ./hello && make -s clean && ls", needs=("make", "gcc")),
    Workload("make-parallel", "make -s -j2 && ./hello && ls build", needs=("make", "gcc")),
    Workload("gcc-directly",
             "gcc -O2 -o prog src/main.c src/util.c && ./prog && rm prog",
             needs=("gcc",)),
    Workload("tar-create-and-extract",
             "tar -cf out.tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner "
             "src docs && mkdir x && tar -xf out.tar -C x && find x | sort && "
             "tar -czf out.tgz --sort=name --mtime=@0 --owner=0 --group=0 src && "
             "tar -tzf out.tgz | sort"),
    Workload("tar-extract-other-owner",
             "tar -xpf owned.tar && stat -c '%n %u %g' owned owned/f.txt",
             boundary=STANDIN, said=STANDIN_SAID),
    Workload("chown-to-another-id",
             "touch f && chown 1234:1234 f; echo rc=$?; stat -c '%u %g' f",
             boundary=STANDIN, said=STANDIN_SAID),
    Workload("gzip-and-zip",
             "gzip -k notes.txt && gunzip -c notes.txt.gz | head -1 && "
             "python3 -m zipfile -c a.zip src && python3 -m zipfile -l a.zip | wc -l"),
    Workload("find-and-grep",
             "find . -name '*.c' | sort; grep -rn TODO --include='*.md' --include='*.txt' "
             ". | sort; grep -c foo notes.txt; find . -type d -empty | sort"),
    Workload("sed-in-place", "sed -i 's/foo/bar/g' notes.txt && cat notes.txt && "
             "sed -i.bak '1d' notes.txt && ls notes.txt*"),
    Workload("xargs-and-wc",
             "find . -name '*.txt' -print0 | sort -z | xargs -0 wc -l; "
             "seq 1 6 | xargs -P 3 -I{} sh -c 'echo {} > out-{}.txt'; ls out-* | wc -l"),
    Workload("chmod-recursive",
             "mkdir -p d/e && touch d/e/f && chmod -R go-rwx . && echo rc=$? && "
             "stat -c '%a %n' d d/e d/e/f notes.txt"),
    Workload("rm-rf-everything",
             "mkdir -p a/b/c && touch a/b/c/f && rm -rf a && rm -rf ./* ./.[!.]* && "
             "echo rc=$? && ls -A | wc -l"),
    Workload("symlinks",
             "ln -s notes.txt link && ln -s missing dangling && ln -s /etc/hostname abs && "
             "readlink link dangling && head -1 link && test -e abs && echo abs-ok; "
             "cp -a link link2 && ls -l link2 | cut -c1"),
    Workload("hard-link", "ln notes.txt hard && stat -c %h notes.txt && cat hard | wc -l"),
    Workload("mkfifo", "mkfifo p && (echo through > p &) && cat p && rm p"),
    Workload("touch-dates-and-sizes",
             "touch -d '2020-01-02 03:04:05' f && date -u -r f +%F && "
             "dd if=/dev/zero of=big bs=1024 count=2048 status=none && stat -c %s big"),
    Workload("copy-move-and-umask",
             "cp -a src src2 && mv src2 moved && umask 077 && touch private && "
             "stat -c %a private && mkdir -p deep/er/est && mv deep/er . && ls er"),
    Workload("flock", "flock lockfile -c 'echo locked' && flock -n lockfile true && "
             "echo free"),
    Workload("dev-shm-and-tmp",
             "echo x > /dev/shm/wl-$$ && cat /dev/shm/wl-$$ && rm /dev/shm/wl-$$ && "
             "d=$(mktemp -d) && echo y > $d/f && cat $d/f && rm -r $d && dirname $d"),
    Workload("write-in-home",
             'echo x > "$HOME/notes.txt"',
             boundary=OUTSIDE, said="outside the folders the box writes"),
    Workload("write-beside-the-project",
             "touch ../beside.txt",
             boundary=OUTSIDE, said="beside.txt is outside the folders the box writes"),
    Workload("read-a-hidden-key",
             'cat "$HOME/.ssh/id_test"',
             boundary="~/.ssh is hidden from the box (it looks empty)",
             said="/.ssh/id_test is hidden from the box"),
]


@cases(WORKLOADS)
def test_file_and_build_work_ends_boxed_as_it_ends_bare(
        work: Workload, entry: str, compare: Callable[[Workload, str], None]) -> None:
    compare(work, entry)
