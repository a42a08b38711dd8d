"""Which traces :class:`~._otlp.OtlpExporter` samples: ``OTEL_TRACES_SAMPLER``, decided as
OpenTelemetry's SDK decides.

Rules:

- The exporter decides once per trial or turn, when its root span begins: the span's
  sampled flag, which its ``traceparent`` carries to the agent service, so a service
  that follows its parent follows the runner. An unsampled trial or turn hands nothing
  over.
- The six samplers of the SDK, by name (any case): ``always_on``, ``always_off``,
  ``traceidratio``, and ``parentbased_always_on`` (the default), ``parentbased_always_off``,
  ``parentbased_traceidratio``. A ``parentbased_`` sampler keeps the sampled flag of a
  ``traceparent`` it continues, either way, and decides a new trace as the sampler its
  name ends with; the other three decide every trace alike.
- ``traceidratio`` samples a trace when the low 64 bits of its id are below the ratio
  times 2**64 (rounded), as the SDK's ``TraceIdRatioBased`` does: processes that sample
  the same ratio keep the same traces. ``OTEL_TRACES_SAMPLER_ARG`` is the ratio, 1.0 when
  unset.
- As the SDK, an unknown sampler name falls back to ``parentbased_always_on`` and a
  ratio that is not a number in 0..1 to 1.0, each with a warning on ``evalport.tracing``
  that names the variable.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Final, NamedTuple

logger = logging.getLogger("evalport.tracing")

LOW_BITS: Final = (1 << 64) - 1
"""The bits of a trace id a ratio decides on (the low 64, as the SDK reads them)."""
SAMPLERS: Final = (
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
)


class Sampler(NamedTuple):
    """A sampler as the rules describe it: ``bound``, trace ids whose low 64 bits are
    below it are sampled (``2**64``: all, ``0``: none); ``parent_based``, a continued
    trace keeps its parent's flag."""

    bound: int
    parent_based: bool

    def sampled(self, trace_id: int, parent_flags: int | None) -> bool:
        """Whether to sample the trace ``trace_id``; ``parent_flags``: the trace flags of
        the ``traceparent`` it continues, ``None`` for a new trace."""
        if self.parent_based and parent_flags is not None:
            return bool(parent_flags & 1)
        return trace_id & LOW_BITS < self.bound


def _ratio() -> float:
    text = os.environ.get("OTEL_TRACES_SAMPLER_ARG", "").strip()
    if not text:
        return 1.0
    try:
        ratio = float(text)
    except ValueError:
        ratio = math.nan
    if not 0.0 <= ratio <= 1.0:
        logger.warning(
            "OTEL_TRACES_SAMPLER_ARG=%s is not a ratio from 0 to 1: sampling at 1.0, every "
            "trace, as OpenTelemetry's SDK does",
            text,
        )
        return 1.0
    return ratio


def configured_sampler() -> Sampler:
    """The sampler ``OTEL_TRACES_SAMPLER`` and ``OTEL_TRACES_SAMPLER_ARG`` name."""
    name = os.environ.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
    if name not in SAMPLERS:
        logger.warning(
            "OTEL_TRACES_SAMPLER=%s is not a sampler evalport knows (%s): sampling as "
            "parentbased_always_on, the default, as OpenTelemetry's SDK does",
            name,
            ", ".join(SAMPLERS),
        )
        name = "parentbased_always_on"
    root = name.removeprefix("parentbased_")
    if root == "traceidratio":
        bound = round(_ratio() * (LOW_BITS + 1))
    else:
        bound = LOW_BITS + 1 if root == "always_on" else 0
    return Sampler(bound, name.startswith("parentbased_"))
