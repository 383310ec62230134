"""DMG-Net's network is the BoT of :mod:`reidcli.models.bot` (DMG-Net paper §5: "ResNet50 …
employing the bag-of-tricks strong baseline scheme"); docs/methods/dmgnet.md.

Nothing here is new architecture: a DMG-Net run saves a model file with ``spec.kind = "bot"``,
so ``reid extract`` and ``reid eval`` treat it exactly like a BoT model (test feature
``bnneck``). The meta-learning lives in :mod:`reidcli.training.dmgnet_meta`.
"""
from __future__ import annotations

from reidcli.errors import ParameterError
from reidcli.models.bot import BoT
from reidcli.models.checkpoint import ModelSpec, build_model

#: the model kind a DMG-Net run writes (its network is a BoT)
DMGNET_MODEL_KIND = "bot"


def dmgnet_model_spec(backbone: str, num_classes: int, input_size: tuple[int, int],
                      last_stride: int = 1) -> ModelSpec:
    """Spec of the DMG-Net network: a BoT with one classifier over all ``num_classes``
    training identities of all sources (docs/methods/dmgnet.md, D9)."""
    return ModelSpec(kind=DMGNET_MODEL_KIND, backbone=backbone, last_stride=last_stride,
                     num_classes=num_classes, input_size=tuple(input_size))


def dmgnet_model(spec: ModelSpec) -> BoT:
    """A randomly initialised BoT for ``spec`` (``spec.kind`` must be ``"bot"``)."""
    if spec.kind != DMGNET_MODEL_KIND:
        raise ParameterError("dmgnet", "model kind", spec.kind, "must be 'bot'",
                             "DMG-Net trains the BoT network; build its spec with "
                             "dmgnet_model_spec")
    return build_model(spec)


__all__ = ["DMGNET_MODEL_KIND", "dmgnet_model_spec", "dmgnet_model"]
