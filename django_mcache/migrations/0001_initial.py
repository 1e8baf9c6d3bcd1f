"""The cache dashboard's model: no table (``managed = False``), only its two permissions."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Dashboard",
            fields=[
                (
                    "id",
                    models.AutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
            ],
            options={
                "verbose_name": "cache dashboard",
                "verbose_name_plural": "cache dashboard",
                "permissions": [
                    ("view_dashboard", "Can view the cache dashboard"),
                    (
                        "act_on_caches",
                        "Can invalidate, refresh and flush caches from the dashboard",
                    ),
                ],
                "managed": False,
                "default_permissions": (),
            },
        ),
    ]
