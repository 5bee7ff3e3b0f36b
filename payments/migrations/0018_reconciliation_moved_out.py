"""ReconciliationRun and ReconciliationItem moved to the ``reconciliation``
app with their tables: dropped from this app's state only (the tables stay,
owned by ``reconciliation`` 0001 under the same names)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('payments', '0017_charge_refund_unclear_at'),
        ('reconciliation', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='reconciliationrun',
                    name='acquirer',
                ),
                migrations.DeleteModel(
                    name='ReconciliationItem',
                ),
                migrations.DeleteModel(
                    name='ReconciliationRun',
                ),
            ],
        ),
    ]
