"""Token-granular prefix sharing in fixed-shape batches: the plan, with no model in it.

Many requests are evaluated together, each as its own llama.cpp sequence in one unified KV
cache. A token that several requests share (a few-shot header, a question before its answer
options) is decoded once and belongs to every sequence that continues it, so the tokens
evaluated approach the ideal count. The plan is a pure function of the requests and the batch
size; `llama_cpp.PackedScorer` carries it out.

What keeps a request's logprobs independent of its neighbours and of history is the executor's
business (flash attention's per-row path, which skips other sequences' cells; cells of a
sequence in position order; a fixed batch shape): see its docstring and
bench/seq_independence.py. The plan only guarantees that every request sees exactly its own
tokens at its own positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Job:
    """One request's work: its token sequence and where its logits are read."""

    tokens: tuple[int, ...]
    """The whole sequence (context and continuation)."""
    first_row: int
    """First position whose logits are read; row p predicts tokens[p + 1]."""
    decode: int
    """Tokens [0, decode) go through the model; rows first_row .. decode - 1 are read."""

    def __post_init__(self):
        if not 0 <= self.first_row < self.decode <= len(self.tokens):
            raise ValueError(
                f"Job: need 0 <= first_row ({self.first_row}) < decode ({self.decode}) "
                f"<= len(tokens) ({len(self.tokens)})"
            )


@dataclass(frozen=True)
class Slot:
    """One token of a batch."""

    job: int
    """The job that emits it (its own token, counted as evaluated for it)."""
    pos: int
    """Position in the job's sequence."""
    token: int
    seqs: tuple[int, ...]
    """Jobs whose sequences contain this token (the emitter first)."""
    logits: bool
    """Whether the emitter reads this position's row."""


@dataclass(frozen=True)
class Batch:
    copies: tuple[tuple[int, int, int], ...]
    """(from job, to job, n): before decoding, job `to` takes positions [0, n) of job `from`."""
    slots: tuple[Slot, ...]
    """At most `size` tokens, in an order where every token follows the tokens it attends to."""
    finished: tuple[int, ...]
    """Jobs whose last row is in this batch."""
    release: tuple[int, ...]
    """Jobs no later batch needs (finished, and their successor has taken its prefix)."""
    keep: tuple[int, int]
    """(job, n): after this batch, only positions [0, n) of this job are still needed (n may be 0)."""


def shared_prefix(jobs: list[Job], reuse: bool = True) -> list[int]:
    """d[i]: how many leading positions job i takes from job i - 1 instead of decoding them.

    At most the common token prefix, at most what job i - 1 decodes, and never a position whose
    row job i reads: each row is read by the job that decodes it."""
    d = [0] * len(jobs)
    if not reuse:
        return d
    for i in range(1, len(jobs)):
        d[i] = common_prefix(jobs[i - 1].tokens, jobs[i].tokens, min(jobs[i - 1].decode, jobs[i].first_row))
    return d


def common_prefix(a, b, limit: int | None = None) -> int:
    """How many leading tokens a and b share (at most `limit`)."""
    n, limit = 0, min(len(a), len(b)) if limit is None else limit
    while n < limit and a[n] == b[n]:
        n += 1
    return n


@dataclass
class _Cursor:
    job: int = 0
    pos: int = 0
    emitted: dict = field(default_factory=dict)
    """job -> positions of it in the KV cache (copied or decoded) before the batch being planned."""


def plan(jobs: list[Job], size: int, reuse: bool = True):
    """Batches of at most `size` tokens that evaluate every job; jobs are best sorted by tokens."""
    if size < 1:
        raise ValueError("plan: size must be >= 1")
    n = len(jobs)
    d = shared_prefix(jobs, reuse)
    cur = _Cursor(0, d[0] if n else 0)
    while cur.job < n:
        first = cur.job
        in_flight = cur.pos > d[first]  # `first` was started in an earlier batch
        emits: list[tuple[int, int]] = []
        while len(emits) < size and cur.job < n:
            emits.append((cur.job, cur.pos))
            cur.pos += 1
            if cur.pos == jobs[cur.job].decode:
                cur.job += 1
                if cur.job < n:
                    cur.pos = d[cur.job]
        last = emits[-1][0]
        # positions of each job that start in this batch, available in the cache before it
        copies, pre = [], {}
        for j in range(first, last + 1):
            if j == first and in_flight:
                pre[j] = cur.emitted[j]
                continue
            before = cur.emitted.get(j - 1, 0) if j == first else pre[j - 1]
            pre[j] = min(d[j], before)
            if pre[j] > 0:
                copies.append((j - 1, j, pre[j]))
        slots = []
        for i, p in emits:
            seqs = [i]
            j = i + 1
            while j <= last and d[j] > p:
                seqs.append(j)
                j += 1
            slots.append(Slot(i, p, jobs[i].tokens[p], tuple(seqs), p >= jobs[i].first_row))
        finished = tuple(sorted({i for i, p in emits if p == jobs[i].decode - 1}))
        nxt = cur.job
        if nxt < n and cur.pos > d[nxt]:  # a job cut by the end of the batch
            keep = (nxt, cur.pos)
        elif nxt < n and nxt > 0:
            keep = (nxt - 1, d[nxt])
        else:
            keep = (last, 0)
        for j in range(first, last + 1):
            cur.emitted[j] = jobs[j].decode if j in finished else cur.pos
        release = tuple(sorted(j for j in cur.emitted if j != keep[0]))
        for j in release:
            del cur.emitted[j]
        yield Batch(tuple(copies), tuple(slots), finished, release, keep)
