from django.apps import AppConfig


class AccountsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounts"
    verbose_name = "Contas"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        from accounts.models import Account, ApiCredential
        from accounts.staff_groups import ensure_staff_groups, sync_permission_names
        from core.snapshots import watch

        watch(Account, ApiCredential)

        # Groups reference permissions, which Django creates in post_migrate.
        post_migrate.connect(ensure_staff_groups, sender=self)
        # Every app's, after each app's own permissions are created (no sender).
        post_migrate.connect(sync_permission_names, dispatch_uid="accounts.sync_permission_names")
