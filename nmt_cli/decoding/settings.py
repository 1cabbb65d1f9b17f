"""What a search is asked to do: one frozen settings object, built from the recipe's decode section
and the per-call choices (n-best, attention), read by every search (nmt_cli/decoding/search.py,
beam.py, constraints.py, sampling.py)."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from nmt_cli.config.sections import DecodeConfig

# Beam search: done sentences leave the batch once they are at least this share of it. Each
# leaving rebuilds what is cut per batch (the output layer's plan, the memory's rows), which costs
# more than computing the few done sentences' rows a little longer.
LEAVE_SHARE = 0.125
# Greedy search: ended sentences leave the batch at every this many steps (one host
# synchronisation each, not one per step)
CHECK_EVERY = 4


@dataclass(frozen=True)
class SearchSettings:
    """One search's settings. ``leave_share`` and ``check_every`` say when done sentences leave
    the batch; no result depends on them."""

    beam_size: int = 5
    alpha: float = 0.6  # GNMT length penalty's alpha (decode.length_penalty)
    max_len_ratio: float = 1.5
    max_len_const: int = 10
    min_len: int = 1
    nbest: int = 1
    attention: bool = False  # keep each hypothesis's attention weights
    max_repeats: int = 0  # the repetition guard (decode.max_repeats); 0 = none
    leave_share: float = LEAVE_SHARE
    check_every: int = CHECK_EVERY

    @classmethod
    def of(cls, config: DecodeConfig, *, nbest: int = 1, attention: bool = False):
        """The settings of the recipe's decode section ``config`` for one call."""
        return cls(
            beam_size=config.beam_size,
            alpha=config.length_penalty,
            max_len_ratio=config.max_len_ratio,
            max_len_const=config.max_len_const,
            min_len=config.min_len,
            nbest=nbest,
            attention=attention,
            max_repeats=config.max_repeats,
        )

    @property
    def greedy(self) -> bool:
        return self.beam_size == 1 and self.nbest == 1


FIELDS = frozenset(f.name for f in fields(SearchSettings))


def settings_with(settings: SearchSettings | None, changes: dict) -> SearchSettings:
    """``settings`` (the defaults where None) with the fields in ``changes`` replaced: the
    searches' keyword form (``beam_search(model, src, lengths, beam_size=4)``)."""
    unknown = set(changes) - FIELDS
    if unknown:
        raise TypeError(f"not a search setting: {', '.join(sorted(unknown))}")
    base = settings if settings is not None else SearchSettings()
    return replace(base, **changes) if changes else base
