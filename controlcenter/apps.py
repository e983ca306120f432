from django.apps import AppConfig


class ControlCenterConfig(AppConfig):
    name = "controlcenter"
    verbose_name = "Millrace control center"
