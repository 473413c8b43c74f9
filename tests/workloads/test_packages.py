"""Python's and Node's package work, from local wheels, sdists and tarballs (no
registry): bare and boxed alike."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from helpers.workloads import Workload, cases

pytestmark = [
    pytest.mark.isolation,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the bwrap box"),
]

WORKLOADS = [
    Workload("venv-pip-install-a-wheel",
             "python3 -m venv .venv && .venv/bin/pip install -q --no-index "
             "dist/hello-1.0-py3-none-any.whl && .venv/bin/python -c "
             "'import hello; print(hello.greet())' && .venv/bin/pip list | grep hello",
             needs=("python3",)),
    Workload("pip-wheel-builds-a-wheel",
             "python3 -m pip wheel -q --no-index --no-build-isolation --no-deps "
             "-w wheels ./pkgsrc && ls wheels && python3 -m zipfile -l wheels/*.whl | "
             "cut -d' ' -f1 | sort", needs=("python3",), volatile=("wheels/*.whl",)),
    Workload("sdist-built-and-installed",
             "cd pkgsrc && python3 setup.py -q sdist >/dev/null 2>&1 && ls dist && cd .. && "
             "python3 -m venv --without-pip --system-site-packages v2 && "
             "v2/bin/python -m pip install -q --no-index --no-build-isolation "
             "pkgsrc/dist/hello-1.0.tar.gz && v2/bin/python -c "
             "'import hello; print(hello.greet())'", needs=("python3",),
             volatile=("pkgsrc/dist/*.tar.gz",)),
    Workload("python-unittest",
             "python3 -B -m unittest discover -s checks 2>&1 | tail -1",
             needs=("python3",)),
    Workload("python-tempfile",
             "python3 -c \"import os, shutil, tempfile\n"
             "d = tempfile.mkdtemp(); print(os.path.dirname(d), tempfile.gettempdir())\n"
             "with tempfile.NamedTemporaryFile() as f:\n"
             "    f.write(b'x' * 10); f.flush(); print(os.path.getsize(f.name))\n"
             "shutil.rmtree(d); print(os.path.exists(d))\"", needs=("python3",)),
    Workload("python-listdir-sees-what-ls-sees",
             "python3 -c \"import os; print(sorted(os.listdir('.')))\"; ls -A | wc -l",
             needs=("python3",)),
    Workload("npm-pack",
             "cd nodepkg && npm pack --silent && tar -tzf nodepkg-1.0.0.tgz | sort",
             needs=("npm",)),
    Workload("npm-install-a-tarball",
             "(cd nodepkg && npm pack --silent >/dev/null) && cd app && "
             "npm install --offline --silent ../nodepkg/nodepkg-1.0.0.tgz && "
             "node -e \"console.log(require('nodepkg')())\" && ls node_modules",
             needs=("npm", "node")),
    Workload("npm-ci-from-the-cache",
             "(cd nodepkg && npm pack --silent >/dev/null) && cd app && "
             "npm install --offline --silent ../nodepkg/nodepkg-1.0.0.tgz && "
             "rm -rf node_modules && npm ci --offline --silent && ls node_modules && "
             "grep -c nodepkg package-lock.json", needs=("npm", "node")),
    # The host's npm cache holds the package, its tarball gone: the box's first
    # npm ci finds it there, read only below the project's own (sandbox/policy/layers.py).
    Workload("npm-ci-from-the-host-s-cache",
             "cd app && npm ci --offline --silent && "
             "node -e \"console.log(require('nodepkg')())\" && ls node_modules",
             before="(cd nodepkg && npm pack --silent >/dev/null) && cd app && "
                    "npm install --offline --silent ../nodepkg/nodepkg-1.0.0.tgz && "
                    "rm -rf node_modules ../nodepkg/nodepkg-1.0.0.tgz",
             needs=("npm", "node")),
    Workload("node-script-writes-files",
             "node -e \"const fs = require('fs'); fs.mkdirSync('out/x', {recursive: true});"
             " fs.writeFileSync('out/x/a.json', JSON.stringify({a: 1})); "
             "console.log(fs.readdirSync('out/x'))\"", needs=("node",)),
]


@cases(WORKLOADS)
def test_package_work_ends_boxed_as_it_ends_bare(
        work: Workload, entry: str, compare: Callable[[Workload, str], None]) -> None:
    compare(work, entry)
