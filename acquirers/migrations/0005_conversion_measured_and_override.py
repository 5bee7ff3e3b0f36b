"""The acquirer's conversion becomes measured (payments.conversion), and the
value staff typed becomes an override of it.

Existing deployments see the same listing after this migration: every typed
value other than 0 is kept, as the override. 0 was the field's default (an
acquirer nobody typed a conversion for), so it becomes "no override" and the
listing still shows 0 (the fallback) until a measurement on a large enough
sample exists. Reversible: going back, an empty override becomes 0 again.
"""

from decimal import Decimal

import django.core.validators
from django.apps.registry import Apps
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor

PERCENT_VALIDATORS = [
    django.core.validators.MinValueValidator(Decimal("0")),
    django.core.validators.MaxValueValidator(Decimal("100")),
]


def untyped_to_null(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    # Through the historical model's plain manager: a migration does not drop
    # snapshots (processes restart with the new code anyway).
    Acquirer = apps.get_model("acquirers", "Acquirer")
    Acquirer.objects.filter(conversion_percent_override=Decimal("0")).update(conversion_percent_override=None)


def null_to_zero(apps: Apps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    Acquirer = apps.get_model("acquirers", "Acquirer")
    Acquirer.objects.filter(conversion_percent_override__isnull=True).update(conversion_percent_override=Decimal("0"))


class Migration(migrations.Migration):
    dependencies = [("acquirers", "0004_verbose_names_pt_br")]

    operations = [
        # Renamed, not dropped and re-added: the typed values stay in place.
        migrations.RenameField(model_name="acquirer", old_name="conversion_percent", new_name="conversion_percent_override"),
        migrations.AlterField(
            model_name="acquirer",
            name="conversion_percent_override",
            field=models.DecimalField(
                blank=True,
                decimal_places=2,
                default=None,
                help_text=(
                    "De 0 a 100. Preenchida, é a conversão mostrada aos clientes na API no lugar da medida; "
                    "vazia, a API mostra a conversão medida (ou 0 enquanto não houver amostra suficiente)."
                ),
                max_digits=5,
                null=True,
                validators=PERCENT_VALIDATORS,
                verbose_name="conversão definida pela equipe (%)",
            ),
        ),
        migrations.RunPython(untyped_to_null, null_to_zero),
        migrations.AddField(
            model_name="acquirer",
            name="conversion_measured_percent",
            field=models.DecimalField(
                blank=True,
                decimal_places=2,
                editable=False,
                help_text="Cobranças pagas ÷ cobranças criadas na janela; vazia abaixo da amostra mínima.",
                max_digits=5,
                null=True,
                verbose_name="conversão medida (%)",
            ),
        ),
        migrations.AddField(
            model_name="acquirer",
            name="conversion_sample",
            field=models.PositiveIntegerField(
                default=0,
                editable=False,
                help_text="Cobranças contadas na última medição.",
                verbose_name="amostra da conversão",
            ),
        ),
        migrations.AddField(
            model_name="acquirer",
            name="conversion_measured_at",
            field=models.DateTimeField(blank=True, editable=False, null=True, verbose_name="conversão medida em"),
        ),
        migrations.AddConstraint(
            model_name="acquirer",
            constraint=models.CheckConstraint(
                condition=models.Q(("conversion_percent_override__isnull", True))
                | models.Q(("conversion_percent_override__gte", 0), ("conversion_percent_override__lte", 100)),
                name="acquirer_conversion_override_0_100",
            ),
        ),
        migrations.AddConstraint(
            model_name="acquirer",
            constraint=models.CheckConstraint(
                condition=models.Q(("conversion_measured_percent__isnull", True))
                | models.Q(("conversion_measured_percent__gte", 0), ("conversion_measured_percent__lte", 100)),
                name="acquirer_conversion_measured_0_100",
            ),
        ),
    ]
