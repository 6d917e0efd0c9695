"""Security settings: the API keys a request must carry, the browser origins allowed, and the TLS files that make
the server speak HTTPS."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from .group import COMMA_SEPARATED, EMPTY_UNSETS, SettingsGroup


class SecuritySettings(SettingsGroup):
    """Who may call the API (keys, browser origins), and HTTPS."""

    title = "Security"

    api_key: Annotated[SecretStr | None, EMPTY_UNSETS] = Field(
        None, description="require Authorization: Bearer <key> (not /health, /ready)"
    )
    api_keys: Annotated[list[SecretStr], NoDecode, COMMA_SEPARATED] = Field(
        [], description="keys accepted as API_KEY is, comma-separated (rotation: old and new at once)"
    )
    cors_origins: Annotated[list[str], NoDecode, COMMA_SEPARATED] = Field(
        [], description="browser origins allowed to call the API, comma-separated, * for any; none by default"
    )
    # SSL_KEYFILE before SSL_CERTFILE: _tls_pair, on the later field, reads the earlier one.
    ssl_keyfile: Annotated[Path | None, EMPTY_UNSETS] = Field(
        None, description="TLS private key (PEM); with SSL_CERTFILE serves HTTPS"
    )
    ssl_certfile: Annotated[Path | None, EMPTY_UNSETS] = Field(
        None, validate_default=True, description="TLS certificate chain (PEM); with SSL_KEYFILE serves HTTPS"
    )

    @field_validator("ssl_keyfile", "ssl_certfile")
    @classmethod
    def _readable_file(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no such file: {value}")
        return value

    @field_validator("ssl_certfile")
    @classmethod
    def _tls_pair(cls, certfile: Path | None, info: ValidationInfo) -> Path | None:
        """Both TLS files or neither (checked here, on the later field, so that the error names a variable)."""
        if "ssl_keyfile" in info.data and (info.data["ssl_keyfile"] is None) != (certfile is None):
            alone = "SSL_CERTFILE" if certfile is not None else "SSL_KEYFILE"
            raise ValueError(f"SSL_KEYFILE and SSL_CERTFILE go together (HTTPS) but {alone} is set alone")
        return certfile

    def accepted_keys(self) -> list[str]:
        """Every key a request may carry (API_KEY and API_KEYS); empty: no key is required."""
        keys = ([self.api_key] if self.api_key is not None else []) + self.api_keys
        return [key.get_secret_value() for key in keys if key.get_secret_value()]
