from django.db import migrations, models


def name_the_items(apps, schema_editor):
    # A refund's redébito now names the item whose evidence measures it, not
    # the charge: a request still waiting names its item (approving it
    # re-quotes the amount, and fails, moving nothing, if it is not the one asked).
    MoneyActionRequest = apps.get_model("accounts", "MoneyActionRequest")
    ReconciliationItem = apps.get_model("payments", "ReconciliationItem")
    waiting = MoneyActionRequest.objects.filter(
        action="redebit_refund_after_chargeback", target_type="payments.charge", state="pending"
    )
    for request in waiting:
        item = ReconciliationItem.objects.filter(approval_request=request).first()
        if item is not None:
            request.target_type, request.target_id = "payments.reconciliationitem", str(item.pk)
            request.save(update_fields=["target_type", "target_id"])


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0013_refund_charge_action"),
        ("payments", "0015_late_payment_returned_there"),
    ]

    operations = [
        migrations.AddField(
            model_name="reconciliationitem",
            name="returned_by_med",
            field=models.BigIntegerField(
                blank=True, help_text="Em centavos, segundo a adquirente.", null=True, verbose_name="devolvido pelo MED"
            ),
        ),
        migrations.AddField(
            model_name="reconciliationitem",
            name="returned_by_refund",
            field=models.BigIntegerField(
                blank=True,
                help_text="Em centavos, segundo a adquirente.",
                null=True,
                verbose_name="devolvido por estorno",
            ),
        ),
        migrations.RunPython(name_the_items, migrations.RunPython.noop),
    ]
