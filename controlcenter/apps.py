from django.apps import AppConfig


class ControlCenterConfig(AppConfig):
    name = "controlcenter"
    verbose_name = "Millrace control center"

    def ready(self) -> None:
        # The pages' live fragments are registered with events once the models are loaded
        # (Django's place for it), so events never imports the pages it renders.
        from controlcenter import fragments

        fragments.register()
