# Joins the two initial migrations made on parallel branches (collector: read model;
# ui: audit and permissions). No operations.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("controlcenter", "0001_audit_and_permissions"),
        ("controlcenter", "0001_read_model"),
    ]

    operations = []
