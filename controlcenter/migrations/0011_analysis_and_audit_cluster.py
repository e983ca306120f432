"""The lag analyses' runs and schedules and the audit log's entries carry their cluster.

Existing rows belong to the default cluster (the field's default, the current cluster's
name, is the default's when `migrate` runs), except a run or schedule whose parameters named
another cluster (how a run launched on a second cluster was kept before this field): that
name moves from its parameters to the field.
"""

from typing import Any

from django.db import migrations, models

import controlcenter.clusters


def cluster_from_parameters(apps: Any, schema_editor: Any) -> None:
    for model in ("AnalysisRun", "AnalysisSchedule"):
        for row in apps.get_model("controlcenter", model).objects.all():
            if isinstance(row.parameters, dict) and "cluster" in row.parameters:
                row.cluster = str(row.parameters.pop("cluster"))
                row.save(update_fields=["cluster", "parameters"])


def cluster_to_parameters(apps: Any, schema_editor: Any) -> None:
    default = controlcenter.clusters.default_name()
    for model in ("AnalysisRun", "AnalysisSchedule"):
        for row in apps.get_model("controlcenter", model).objects.exclude(cluster=default):
            row.parameters = {**(row.parameters or {}), "cluster": row.cluster}
            row.save(update_fields=["parameters"])


class Migration(migrations.Migration):

    dependencies = [
        ('controlcenter', '0010_lag_anomaly_queries'),
    ]

    operations = [
        migrations.AddField(
            model_name='analysisrun',
            name='cluster',
            field=models.CharField(default=controlcenter.clusters.current_name, max_length=100),
        ),
        migrations.AddField(
            model_name='analysisschedule',
            name='cluster',
            field=models.CharField(default=controlcenter.clusters.current_name, max_length=100),
        ),
        migrations.AddField(
            model_name='auditentry',
            name='cluster',
            field=models.CharField(default=controlcenter.clusters.current_name, max_length=100),
        ),
        migrations.AddIndex(
            model_name='analysisrun',
            index=models.Index(fields=['cluster', '-created_at'], name='analysisrun_cluster_created'),
        ),
        migrations.AddIndex(
            model_name='auditentry',
            index=models.Index(fields=['cluster', '-at'], name='auditentry_cluster_at'),
        ),
        migrations.RunPython(cluster_from_parameters, cluster_to_parameters, elidable=True),
    ]
