"""URLconf for this app's own port: the app at the root."""

from django.urls import include, path

urlpatterns = [path("", include(__name__.rsplit(".", 1)[0] + ".urls"))]
