"""The audit log page: every state change, newest first, searchable, paginated; the current
cluster's entries unless `?cluster=all` (pages/scope.py)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from controlcenter.models import AuditEntry
from controlcenter.pages import scope

PER_PAGE = 50


def audit_log(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    result = request.GET.get("result", "")
    shown = scope.shown_cluster(request)
    entries = _search(scope.of_cluster(AuditEntry.objects.all(), shown), query, result)
    page = Paginator(entries, PER_PAGE).get_page(request.GET.get("page"))
    context = {"page": page, "q": query, "result": result, "results": AuditEntry.Result,
               **scope.context(shown)}
    return render(request, "controlcenter/audit_log.html", context)


def _search(entries: QuerySet[AuditEntry], query: str, result: str) -> QuerySet[AuditEntry]:
    """Entries whose user, action or target contain `query`, with the given result."""
    if query:
        entries = entries.filter(
            Q(username__icontains=query) | Q(action__icontains=query) | Q(target__icontains=query)
        )
    if result in AuditEntry.Result.values:
        entries = entries.filter(result=result)
    return entries
