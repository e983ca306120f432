"""The same job on a Spark standalone cluster (a master and one worker started from the
launcher shipped inside the pyspark package, on 127.0.0.1 and free ports) gives the same result
as on local[*]. The cluster is the session's (`spark_cluster`), which other tests use too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.laganalysis.history import catching_up_group, draining_group, write_samples
from tests.laganalysis.test_run_cli import start
from tests.sparkcluster import SparkCluster

pytestmark = pytest.mark.slow


def test_a_job_on_a_standalone_cluster_matches_local(
    tmp_path: Path, spark_cluster: SparkCluster
) -> None:
    samples = write_samples(tmp_path / "s.jsonl", [*catching_up_group(), *draining_group()])
    earlier = {app["id"] for app in spark_cluster.state().get("completedapps", [])}
    results = {}
    for master in ("local[2]", spark_cluster.url):
        out = tmp_path / f"{master.split(':')[0]}.json"
        proc = start("eta", {"samples_path": samples}, out, master=master)
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, (stdout + stderr)[-3000:]
        results[master] = json.loads(out.read_text())["tables"]
    apps = [app["name"] for app in spark_cluster.state().get("completedapps", [])
            if app["id"] not in earlier]
    assert results["local[2]"] == results[spark_cluster.url]
    groups = {r["group"]: r for r in results[spark_cluster.url]["groups"]["rows"]}
    assert groups["g2"]["eta_seconds"] == 500.0
    assert apps == ["millrace-eta"]
