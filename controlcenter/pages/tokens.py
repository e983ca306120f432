"""The API token page: a signed-in user creates (or replaces) the token that scripts and
Prometheus present to /api/v1/ and the lag metrics (`apitokens.py`). The key is shown once,
on the answer to the POST that made it; afterwards only when it was made."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.shortcuts import render

from controlcenter import apitokens, securityactions


@login_required
def api_token(request: HttpRequest) -> HttpResponse:
    key = None
    if request.method == "POST":
        key = securityactions.create_api_token(request, request.user)  # type: ignore[arg-type]
    elif request.method != "GET":
        return HttpResponseNotAllowed(["GET", "POST"])
    return render(request, "controlcenter/api_token.html", {
        "key": key, "created": apitokens.token_created(request.user)})  # type: ignore[arg-type]
