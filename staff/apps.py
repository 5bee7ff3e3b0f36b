from django.apps import AppConfig


class StaffConfig(AppConfig):
    """Staff's sign-in to the back office: the second factor (django-otp) after
    the password. No models of its own: django-otp's devices hold the state."""

    name = "staff"
    verbose_name = "Equipe"
