"""Signing in and out of the control center (Django's auth views, our templates).

Signing out is a POST (a form with a CSRF token in the header), as Django requires since
5.0: a link could sign a user out from another site.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views


class LoginView(auth_views.LoginView):
    template_name = "controlcenter/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context["login_required"] = settings.MILLRACE_UI_LOGIN_REQUIRED
        return context


login = LoginView.as_view()
logout = auth_views.LogoutView.as_view()
