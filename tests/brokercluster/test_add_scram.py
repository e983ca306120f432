"""`python -m brokercluster --add-scram` gives a new cluster its first SCRAM users, as
`kafka-storage format --add-scram` does, and refuses a malformed one before starting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka.admin import AdminClient, ScramMechanism

from tests.brokerproc import REPO, ClusterProcess


def test_a_new_cluster_starts_with_the_bootstrap_users(tmp_path: Path) -> None:
    with ClusterProcess(tmp_path, brokers=1, args=[
            "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret,iterations=8192]"]
            ) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        described = admin.describe_user_scram_credentials(["admin"])["admin"].result(30)
        assert [(info.mechanism, info.iterations)
                for info in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_512, 8192)]


def test_a_malformed_user_is_refused_before_anything_starts(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "brokercluster", "--data-dir", str(tmp_path),
         "--add-scram", "SCRAM-SHA-1=[name=a,password=b]"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "unknown mechanism 'SCRAM-SHA-1'" in done.stderr
