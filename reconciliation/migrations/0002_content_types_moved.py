"""The moved models' content types follow them (``payments`` →
``reconciliation``): their permissions (``resolve_reconciliationitem``, kept
by the groups and users that hold it), the admin's log and the approval
requests that name an item (``MoneyActionRequest.target_type``) keep
pointing at the same rows."""

from django.db import migrations

MODELS = ("reconciliationrun", "reconciliationitem")


def _move(apps, schema_editor, source, target):
    ContentType = apps.get_model("contenttypes", "ContentType")
    MoneyActionRequest = apps.get_model("accounts", "MoneyActionRequest")
    for model in MODELS:
        if ContentType.objects.filter(app_label=target, model=model).exists():
            continue  # already there (made by a migrate that ran before this one)
        ContentType.objects.filter(app_label=source, model=model).update(app_label=target)
        MoneyActionRequest.objects.filter(target_type=f"{source}.{model}").update(target_type=f"{target}.{model}")


def forwards(apps, schema_editor):
    _move(apps, schema_editor, "payments", "reconciliation")


def backwards(apps, schema_editor):
    _move(apps, schema_editor, "reconciliation", "payments")


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("accounts", "0014_security_review_fixes"),
        ("reconciliation", "0001_initial"),
        ("payments", "0018_reconciliation_moved_out"),
    ]

    operations = [migrations.RunPython(forwards, backwards)]
