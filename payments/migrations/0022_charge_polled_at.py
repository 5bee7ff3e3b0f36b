# The status poll's last read of a charge and the index it selects pending
# charges by (payments.status_polling: the least recently read first).

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # CONCURRENTLY, as the other charge indexes (payments 0002, 0007): the
    # table keeps taking writes while it builds; outside a transaction. The
    # nullable column without a default is a catalog change only.
    atomic = False

    dependencies = [
        ('accounts', '0015_med_holds'),
        ('acquirers', '0005_conversion_measured_and_override'),
        ('payments', '0021_due_charge_api'),
    ]

    operations = [
        migrations.AddField(
            model_name='charge',
            name='polled_at',
            field=models.DateTimeField(blank=True, editable=False, null=True, verbose_name='consultada na adquirente em'),
        ),
        AddIndexConcurrently(
            model_name='charge',
            index=models.Index(models.OrderBy(models.F('polled_at'), nulls_first=True), models.F('created_at'), condition=models.Q(('status', 'pending')), name='charge_pending_poll'),
        ),
    ]
