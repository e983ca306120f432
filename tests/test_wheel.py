"""The built wheel carries what the code opens at run time, and a broker runs from it.

An editable install reads every file from the checkout, so a data file left out of
`[tool.setuptools.package-data]` only shows once someone installs the wheel.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from brokercluster.ports import free_port

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("apierrors", "brokercore", "brokercluster", "clusterclient", "connect",
            "controlcenter", "laganalysis", "millrace", "registry", "restproxy", "sparkkafka")


def _package_files() -> set[str]:
    """Every file of the packages a wheel should install: all but READMEs and caches."""
    return {
        path.relative_to(REPO).as_posix()
        for package in PACKAGES
        for path in (REPO / package).rglob("*")
        if path.is_file() and path.suffix not in {".md", ".pyc"}
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A copy of the sources, so that a stale build/ of the checkout cannot fill gaps.
    source = tmp_path_factory.mktemp("source")
    shutil.copy(REPO / "pyproject.toml", source)
    for package in PACKAGES:
        shutil.copytree(REPO / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(out), str(source)], check=True, timeout=240)
    (built,) = out.glob("millrace-*.whl")
    return built


def test_the_wheel_holds_every_package_file(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    assert sorted(_package_files() - shipped) == []


@pytest.fixture
def wheel_broker(wheel: Path, tmp_path: Path) -> Iterator[str]:
    """`python -m brokercore` from the unpacked wheel (a pure wheel installs by unpacking),
    run outside the checkout, with the dependencies of this virtualenv."""
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    port = free_port()
    start = ("import runpy, sys, brokercore; "
             f"assert brokercore.__file__.startswith({str(site)!r}), brokercore.__file__; "
             "runpy.run_module('brokercore', run_name='__main__', alter_sys=True)")
    output = tmp_path / "broker.out"
    with output.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", start, "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"log.dirs={tmp_path / 'logs'}"],
            cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
            stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b"serving Kafka on" not in output.read_bytes():
            assert proc.poll() is None, output.read_text(errors="replace")
            assert time.monotonic() < deadline, output.read_text(errors="replace")
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(15)
        print(output.read_text(errors="replace")[-3000:])


def test_a_broker_installed_from_the_wheel_answers_api_versions(wheel_broker: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=wheel_broker)
    try:
        # check_version sends ApiVersions and reads the broker's version from the answer.
        assert admin._client.check_version() >= (4, 0)
    finally:
        admin.close()
