# Staff permission to reset an acquirer's circuit breaker (issue #7).

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('acquirers', '0002_inboundnotification'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='acquirer',
            options={'ordering': ['key'], 'permissions': [('reset_circuit_breaker', "Can reset the acquirer's circuit breaker")], 'verbose_name': 'adquirente'},
        ),
    ]
