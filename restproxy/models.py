"""Which proxy process owns each consumer instance, for processes that share a database."""

from django.db import models


class ConsumerInstanceOwner(models.Model):
    """One REST consumer instance and the internal URL of the process whose thread owns it.

    Written only when RESTPROXY_INTERNAL_URL is set (several proxy processes); a request
    that reaches another process is forwarded to `owner_url`.
    """

    group = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    owner_url = models.CharField(max_length=1024)
    format = models.CharField(max_length=16)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "name"], name="restproxy_unique_instance")
        ]

    def __str__(self) -> str:
        return f"{self.group}/{self.name} @ {self.owner_url}"
