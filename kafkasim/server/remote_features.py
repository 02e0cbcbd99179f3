"""The feature calls of :class:`kafkasim.server.remote.RemoteBroker`, as a mixin over
:class:`~kafkasim.server.remote_conn.RemoteConnection`: what ``kafkasim features`` calls.

=====================================  =================================================
Broker call                            Kafka requests
=====================================  =================================================
supported_features                     ApiVersions v4 (SupportedFeatures)
finalized_features                     ApiVersions v4 (FinalizedFeatures)
finalized_features_epoch               ApiVersions v4 (FinalizedFeaturesEpoch)
update_features                        UpdateFeatures v1+
=====================================  =================================================

ApiVersions is asked again at v4 for these (the connection negotiates with v3, whose answers
leave out features whose range starts at 0, such as ``transaction.version``). The answers
have the in-process broker's shapes (``{name: (min, max)}``, ``{name: level}``, an int).

Thread-safety: as the connection (one lock serialises the exchanges).
"""

from __future__ import annotations

from typing import Mapping, Optional

from kafkasim.server.remote_conn import _raise

__all__ = ["FeatureCalls"]

_UPGRADE_TYPE_CODES = {"upgrade": 1, "safe_downgrade": 2, "unsafe_downgrade": 3}


class FeatureCalls:
    """Feature calls over the wire (mixin; needs ``_lock``, ``_sock``, ``_connect``, ``_exchange``, ``_call``)."""

    def _api_versions_v4(self):
        with self._lock:
            if self._sock is None:
                self._connect()
            answer = self._exchange(18, 4, {"client_software_name": "kafkasim", "client_software_version": "0"})
        _raise(answer.error_code, None, "ApiVersions")
        return answer

    @property
    def supported_features(self) -> dict:
        return {f.name: (int(f.min_version), int(f.max_version)) for f in self._api_versions_v4().supported_features}

    @property
    def finalized_features(self) -> dict:
        return {f.name: int(f.max_version_level) for f in self._api_versions_v4().finalized_features}

    @property
    def finalized_features_epoch(self) -> int:
        return int(self._api_versions_v4().finalized_features_epoch)

    def update_features(self, levels: Mapping[str, int], *, upgrade_types: Optional[Mapping[str, str]] = None,
                        validate_only: bool = False) -> None:
        types = dict(upgrade_types or {})
        answer = self._call(57, {"timeout": 60_000, "validate_only": bool(validate_only), "feature_updates": [
            {"feature": name, "max_version_level": int(level),
             "upgrade_type": _UPGRADE_TYPE_CODES.get(types.get(name, "upgrade"), 0)}
            for name, level in levels.items()]})
        _raise(answer.error_code, answer.error_message, "UpdateFeatures")
