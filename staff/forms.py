from __future__ import annotations

from django import forms

#: The field's name, also hidden from django-axes' record of failures (AXES_SENSITIVE_PARAMETERS).
CODE_FIELD = "otp_token"


class CodeForm(forms.Form):
    otp_token = forms.CharField(
        label="Código",
        max_length=32,
        strip=True,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "autofocus": True, "autocapitalize": "none", "spellcheck": "false"}
        ),
    )
