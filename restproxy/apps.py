from django.apps import AppConfig


class RestproxyConfig(AppConfig):
    name = "restproxy"
