"""Recall: candidates by embedding (HNSW) and by keywords (BM25), spreading activation, the six-factor composite.

1. Candidates: the `pool` nearest active traces in scope by cosine (HNSW, filtered by scope), plus —
   with hybrid similarity — the `pool` best lexical matches (`engram.memory.cognitive.lexical`), plus — with
   HyDE — the traces near the HyDE vector above the adaptive threshold. The HyDE vector is the mean of
   the query's embedding and the hypothetical memory's (both unit, renormalised), as HyDE defines it
   (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels", §3.2: the query's
   own embedding is averaged with the hypothetical documents'): the hypothetical memory is a guess, and
   averaging keeps the question in it. Searched alone, a hypothetical memory that restates the question
   with its names (the offline heuristic's, "Caroline's identity") is nearest to the short memories that
   say little but the name ("Makes Caroline feel connected."): on LoCoMo dev (bench/recall.py, in-process),
   the mean instead of the hypothesis alone took recall@10 from 81.9 to 83.8 and multi-hop from 55.0 to
   56.9 — all/multi-hop on conv-26, where it was chosen, 81.5/46.9 → 83.4/49.2; held out, conv-30
   77.8/56.2 → 82.7/57.7 and conv-41 84.5/62.9 → 84.7/64.5 — no category lower. (Leaving HyDE out
   instead gave conv-26 more multi-hop, 53.4, but lost on conv-41, 60.5, and on open-domain, 52.6 → 39.5.)
2. Similarity of each candidate (`memory.retrieval.similarity`):
   - "embedding": the cosine to the query (the issue's literal definition; with HyDE, the better of
     the cosines to the query and to the HyDE vector);
   - "hybrid" (default): (1 − SIMILARITY_LEXICAL_SHARE) · that cosine + SIMILARITY_LEXICAL_SHARE ·
     the lexical match. The embedding hears paraphrase, the keywords hear the rare words a question
     shares with its answer (names, places, objects); on conversational memory each alone misses what
     the other finds (see `engram.memory.cognitive.lexical` for the numbers and the normalisation). Both
     parts are absolute scales in [0, 1], so the fused value is too. When the query has no word the
     index knows, there is no lexical evidence and similarity is the cosine. The keywords' share is 0.3,
     not an equal half: the cosine is of the focused query (below) and, with HyDE, of the hypothesis too,
     so it already hears the rare words; at equal say they counted twice and a memory that merely named
     them outranked one that said the thing (LoCoMo dev, chosen on conv-26 only: all/multi-hop 84.3/54.9
     → 84.4/60.4; held out conv-30 83.2/62.3 → 82.7/66.8, conv-41 84.9/65.6 → 86.1/66.9; recall@10 84.3
     → 84.7, multi-hop 60.5 → 64.1, the same with the questions in reverse order; the other settings
     tried are in `engram.config.defaults`).
   The query vector the caller supplies is the embedding of the *focused* query
   (`LexicalIndex.focus`: the words most of the agent's memories hold left out); `focus` records that text.
3. Pseudo-relevance feedback ("feedback", `FeedbackSettings`): the best `traces` candidates so far are taken
   as relevant. The feedback query is the query vector plus the mean of their stored vectors (Rocchio: no
   second embedding), and the query's terms plus their most characteristic other terms at half weight
   (RM3-style expansion). Its best keyword matches join the candidates ("feedback"); its vector is compared
   with the candidates' stored vectors, never searched (a second vector search cost more than the rest of the
   recall and found nothing the keywords and the first search did not: same recall@10 on LoCoMo dev). Each
   candidate's similarity becomes (1 − share) · its similarity to the query + share · its similarity to the
   feedback query.
   What a question is about is often said in words the question does not use ("What does X do to
   relax?" — pottery, running); the first hits name them, and the feedback query finds the other
   memories that share them. Both parts stay in [0, 1], and every hit shows them (`feedback`).
4. Spreading activation from the best `SPREAD_SEEDS` candidates by similarity along the trace graph;
   what it reaches joins the candidates (their cosine and lexical match are computed exactly).
5. A candidate that an active trace contradicts (a correction kept beside it, `keep_both`) brings that
   correction in as a candidate too ("correction"), and is never ranked above it: it moves to just after
   its correction, whatever its composite (what was corrected must not be what a question finds first).
6. Each candidate gets its six factors and the weighted composite; the best `limit` are returned
   with the breakdown. Per-call weights replace the configured ones for the whole retrieval.
7. One memory per source: a candidate made from the same message(s) as a better one already returned
   (a fact and the episode of the message it came from; two facts of one message) says nothing the
   answer does not already have, so it gives its place to the next memory from other messages. Each
   hit carries the question it answers (`context`, a reply's only) with that question's message, so
   what it returns reads on its own — and so that message counts as already returned too: a memory
   made from the question a better hit answers gives its place as well. On LoCoMo dev, with step 1's
   HyDE vector: recall@10 83.8 → 84.3, multi-hop 56.9 → 60.5 (all/multi-hop: conv-26 83.4/49.2 →
   84.3/54.9; conv-30 82.7/57.7 → 83.2/62.3; conv-41 84.7/64.5 → 84.9/65.6); with the previous HyDE it
   gained less (81.9 → 82.1, multi-hop 55.0 → 55.4; conv-26 and conv-30 unchanged, conv-41 +1.1).
8. Dormant traces (`DormantSettings`): a trace the decay sweep pruned (the guide's rule: strength below
   0.05 → soft-delete) is no longer active memory: no search above finds it, nothing reinforces it, it
   seeds neither feedback nor spreading. But soft deletion is not erasure: the log keeps the message it
   was made from, and a cue specific enough can still bring it back — forgetting is mostly a failure to
   retrieve, not a loss of what was stored (Tulving & Pearlstone 1966: items not recalled freely were
   recalled with the right cue). So the reader keeps pruned traces in indexes of their own
   (`AgentMemory.dormant_index`, `dormant_lexical`); the `pool` best of them for the query (cosine and
   keywords, as in step 1) are scored exactly as an active candidate would be (similarity with feedback,
   the six factors; their strength is what decay left, below the prune threshold), their composite multiplied by
   `DormantSettings.weight` (DORMANT_WEIGHT, 1.0: scored as an active trace would be — its own decayed strength and
   low recency already rank it below an active trace of equal match; the former 0.85 penalised it twice, and 1.0
   was chosen in every fold of a leave-one-conversation-out run on LoCoMo dev, held-out recall@10 mean / worst
   84.4 / 82.7 → 85.1 / 84.4). It enters the results where the active memory has nothing as good. Such a hit says where
   it came from (`via` "dormant", `pruned_us`) and maps back to its source messages like any other; its
   retrieval reinforces nothing (the fold reinforces active traces only), so it stays pruned.
9. Questions and their answers: a stored question is evidence of interest, not of a fact. A trace whose every
   sentence asks (`MemoryTrace.asks`, computed at fold time from the content) has its composite × QUESTION_WEIGHT
   (0.5), so a statement that answers the query ranks above a question that merely resembles it ("What is my
   sister allergic to?" finds the fact, not the user's earlier identical question). A question among the
   candidates brings the traces made from replies to it ("answer": the reply's `context_message_ids`,
   `answers_of`), and never ranks above one of them that is listed: it moves to just after it, and one memory
   per source (step 7) then drops it, since the reply shows it as its context. On LoCoMo dev neither changes one
   item's recall (both question orders): a reply is indexed with its question already; the link is a guarantee.
10. Validity in time (`as_of_us`): a trace is true from the event time of what it was made from (`valid_from_us`)
   until a newer trace contradicts it (a correction, a later contradicting fact: `valid_to_us`, `superseded_by`; the
   book derives both from `contradicted_by`). By default recall answers what is true now: a superseded trace that
   was soft-deleted is not a candidate (one kept beside its correction, `keep_both`, ranks after it and says it
   was superseded). As of a time, only traces valid then are candidates — those learned later are not, and
   superseded ones come back from the apart indexes of step 8 (via "superseded"), scored as active ones.
11. What each hit shows (`RecallHit.shown`, `engram.memory.cognitive.shown`): the best 3 whole, the rest as query
   snippets, contexts cut to their last question, no sentence twice. Content and provenance stay whole.

Pure: the caller supplies vectors, the indexes, event time and mood; it records `TraceRetrieved`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol

import numpy as np

from engram.config import defaults as d
from engram.config.agent import AgentConfig
from engram.memory.cognitive.book import TraceBook
from engram.memory.cognitive.decay import strength_at
from engram.memory.cognitive.filters import TraceFilter
from engram.memory.cognitive.graph import spread
from engram.memory.cognitive.hit import HitShown
from engram.memory.cognitive.hyde import HydeOutcome, HydeSettings, adaptive_search
from engram.memory.cognitive.lexical import LexicalIndex
from engram.memory.cognitive.model import MemoryTrace
from engram.memory.cognitive.personality import Pad
from engram.memory.cognitive.scoring import DEFAULT_WEIGHTS, Factors, factors, weights_with
from engram.memory.cognitive.shown import shown_texts


SIMILARITY_MODES = ("hybrid", "embedding")
# A scored candidate: (composite, trace id, factors, contributions).
Scored = tuple[float, str, Factors, Factors]


class VectorIndex(Protocol):
    def search(self, vector: np.ndarray, k: int, allowed: Callable[[str], bool] | None = None) -> list[tuple[str, float]]: ...

    def vectors(self, keys: list[str]) -> np.ndarray: ...

    def __contains__(self, key: str) -> bool: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class SpreadSettings:
    seeds: int = d.SPREAD_SEEDS
    hop_decay: float = d.SPREAD_HOP_DECAY
    floor: float = d.SPREAD_FLOOR
    cap: float = d.SPREAD_CAP
    max_depth: int = d.SPREAD_MAX_DEPTH
    max_results: int = d.SPREAD_MAX_RESULTS


@dataclass(frozen=True)
class FeedbackSettings:
    traces: int = d.FEEDBACK_TRACES  # 0: no feedback stage
    terms: int = d.FEEDBACK_TERMS
    term_weight: float = d.FEEDBACK_TERM_WEIGHT
    vector_weight: float = d.FEEDBACK_VECTOR_WEIGHT
    share: float = d.FEEDBACK_SHARE


@dataclass(frozen=True)
class DormantSettings:
    """Step 8: how many dormant (decay-pruned) traces are considered, and the factor on their composite."""

    pool: int = d.DORMANT_POOL  # 0: no dormant stage
    weight: float = d.DORMANT_WEIGHT


class RecallHit(HitShown, kw_only=True):
    """One result: the trace as it was at retrieval, its composite score and the score by factor."""

    score: float
    factors: Factors  # raw factor values in [0, 1]
    contributions: Factors  # weight · factor; they sum to `score`
    source_type: str
    entities: tuple[str, ...]
    importance: float
    strength: float  # current (Ebbinghaus) strength, in [0, 1]
    retrieval_count: int
    encoded_us: int
    cosine: float = 0.0  # the embedding part of similarity (to the query, or to the HyDE vector when better)
    lexical: float = 0.0  # the keyword part (0 when similarity is "embedding")
    feedback: float = 0.0  # similarity to the feedback query (step 3; 0 without feedback)
    pruned_us: int | None = None  # a dormant trace's pruning time (step 8); None for an active trace
    valid_from_us: int = 0  # validity in time (step 10): true from ...
    valid_to_us: int | None = None  # ... until a newer trace contradicted it (None: still true)


@dataclass(frozen=True)
class RecallResult:
    query: str
    agent: str
    discussion: str | None
    now_us: int
    weights: Factors
    hits: tuple[RecallHit, ...]
    candidates: int
    mood: Pad
    hyde: HydeOutcome | None = None
    spread: dict[str, float] = field(default_factory=dict)
    similarity: str = "embedding"  # how similarity was computed: "hybrid" or "embedding"
    keyword_share: float = 0.0  # the keyword match's share of similarity (0: the embedding alone)
    focus: str = ""  # the focused query whose embedding was searched (step 2), when the caller says
    feedback_traces: tuple[str, ...] = ()  # the traces the feedback query was made of (step 3)
    feedback_terms: tuple[str, ...] = ()  # the terms it added to the query's
    feedback_share: float = 0.0  # the feedback query's share of similarity (0: no feedback stage)
    dormant_candidates: int = 0  # dormant traces scored (step 8)


class RecallMemory(Protocol):
    """What recall reads of an agent's memory (`engram.memory.cognitive.memory.AgentMemory` is one)."""

    @property
    def book(self) -> TraceBook: ...

    @property
    def index(self) -> VectorIndex: ...

    @property
    def lexical(self) -> LexicalIndex | None: ...  # the keyword index; hybrid similarity needs it

    @property
    def dormant_index(self) -> VectorIndex | None: ...  # the decay-pruned traces (step 8; None: no dormant stage)

    @property
    def dormant_lexical(self) -> LexicalIndex | None: ...

    @property
    def answers_of(self) -> Callable[[str], list[str]] | None: ...  # trace id -> the traces made from replies to it


@dataclass(frozen=True)
class RecallQuery:
    """What one recall asks: the question, its embedding, and the moment and mood it is asked in."""

    text: str
    vector: np.ndarray  # the embedding of `focus` (or of `text`)
    now_us: int
    mood: Pad
    limit: int = d.RECALL_DEFAULT_LIMIT
    discussion: str | None = None  # None: the whole agent
    focus: str = ""  # the text `vector` embeds, when it is not `text` itself (reported, not used)
    hyde_text: str = ""  # HyDE's hypothetical memory, and its embedding (None: no HyDE stage)
    hyde_vector: np.ndarray | None = None
    as_of_us: int | None = None  # answer what was true at that event time (step 10); None: what is true now
    only: TraceFilter | None = None  # a user's filter every candidate passes (`engram.memory.cognitive.filters`)


def recall(memory: RecallMemory, asked: RecallQuery, settings: RecallSettings) -> RecallResult:
    """The best `asked.limit` traces of `memory` for `asked`, scored as the agent's `settings` say (per-call
    overrides, such as a request's weights, are a `dataclasses.replace` of them)."""
    book, index, lexical = memory.book, memory.index, memory.lexical
    dormant_index, dormant_lexical = memory.dormant_index, memory.dormant_lexical
    query, query_vector, now_us, mood, limit = asked.text, asked.vector, asked.now_us, asked.mood, asked.limit
    discussion, focus, hyde_text, hyde_vector = asked.discussion, asked.focus, asked.hyde_text, asked.hyde_vector
    weights, pool, spreading, half_life_hours = settings.weights, settings.pool, settings.spreading, settings.half_life_hours
    hyde_settings, similarity, lexical_share = settings.hyde, settings.similarity, settings.lexical_share
    feedback, dormant, question_weight = settings.feedback, settings.dormant, settings.question_weight
    answers_of, as_of_us, only = memory.answers_of, asked.as_of_us, asked.only
    if similarity not in SIMILARITY_MODES:
        raise ValueError(f"similarity must be one of {SIMILARITY_MODES}, got {similarity!r}")
    traces = book.traces
    hybrid = similarity == "hybrid" and lexical is not None

    verdicts: dict[str, bool] = {}  # asked once per trace and recall: every search filters by it

    def allowed(tid: str) -> bool:
        ok = verdicts.get(tid)
        if ok is None:
            t = traces.get(tid)
            ok = verdicts[tid] = (t is not None and t.active and t.in_scope(discussion)
                                  and (as_of_us is None or t.valid_at(as_of_us))
                                  and (only is None or only.admits(t)))
        return ok

    q = _unit(query_vector)
    vectors = _Vectors(index)
    pool = max(pool, 4 * limit)
    cos: dict[str, float] = dict(index.search(q, pool, allowed)) if limit > 0 else {}
    via = {tid: "similarity" for tid in cos}
    terms = lexical.terms(query) if hybrid and lexical is not None else []
    # The query's information includes its words that only dormant traces hold (step 8): an active trace's keyword
    # match is its share of all of it, as a dormant trace's is (both on one scale).
    known = lexical.information(terms) if hybrid and lexical is not None else 0.0
    dormant_only = 0.0
    if hybrid and lexical is not None and dormant_lexical is not None and dormant.pool > 0 and dormant.weight > 0:
        dormant_only = sum(dormant_lexical.bm25.joint_idf(t, lexical.bm25) for t in sorted(set(terms))
                           if lexical.bm25.idf(t) == 0)
    scale = known / (known + dormant_only) if known + dormant_only > 0 else 1.0
    lex: dict[str, float] = {}
    if hybrid and lexical is not None and limit > 0:
        lex = {tid: scale * m for tid, m in lexical.search(terms, pool, allowed)}
        for tid in lex:
            via.setdefault(tid, "keywords")
    outcome = None
    if hyde_vector is not None and limit > 0:
        h = _unit(q + _unit(hyde_vector))  # step 1: HyDE's vector is the mean of the query's and the hypothesis'
        hs = hyde_settings
        outcome = adaptive_search(index, h, pool, allowed, hs.initial, hs.minimum, hs.step, adaptive=hs.adaptive, text=hyde_text)
        for tid, hyde_cos in outcome.hits:
            via.setdefault(tid, "hyde")
            cos[tid] = max(cos.get(tid, -1.0), hyde_cos)
    _complete(cos, lex, via, vectors, lexical if hybrid else None, terms, q, scale)
    lexical_evidence = hybrid and known + dormant_only > 0
    share = lexical_share if lexical_evidence else 0.0
    sims = {tid: _fuse(cos[tid], lex.get(tid, 0.0), share) for tid in via}
    fb = _Feedback.of(sims, vectors, q, lexical if hybrid else None, terms, feedback, pool, allowed, via, share)
    if fb is not None:
        _complete(cos, lex, via, vectors, lexical if hybrid else None, terms, q, scale)
        fb.prepare(via, vectors)
        sims = {tid: fb.blend(_fuse(cos[tid], lex.get(tid, 0.0), share), tid) for tid in via}
    answering = sorted({a for tid in list(via) if traces[tid].asks for a in answers_of(tid)
                        if a not in via and allowed(a) and a in vectors}) if answers_of is not None else []
    if answering:  # step 9: a question among the candidates brings the replies that answered it
        for tid in answering:
            via[tid] = "answer"
        _complete(cos, lex, via, vectors, lexical if hybrid else None, terms, q, scale)
        if fb is not None:
            fb.prepare(answering, vectors)
        for tid in answering:
            base = _fuse(cos[tid], lex.get(tid, 0.0), share)
            sims[tid] = fb.blend(base, tid) if fb is not None else base
    seeds = dict(sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[: spreading.seeds])
    activation = spread(
        book.graph,
        {k: max(0.0, v) for k, v in seeds.items()},
        hop_decay=spreading.hop_decay,
        floor=spreading.floor,
        cap=spreading.cap,
        max_depth=spreading.max_depth,
        max_results=spreading.max_results,
        active=allowed,
    ) if spreading.max_depth > 0 and spreading.seeds > 0 else {}
    reached = sorted(tid for tid in activation if tid not in via and tid in vectors)
    correcting = sorted({c for tid in list(via) + reached for c in traces[tid].contradicted_by
                         if c not in via and c not in reached and allowed(c) and c in vectors})
    for tid in correcting:
        via[tid] = "correction"
    reached += correcting
    if reached:
        for tid in reached:
            via[tid] = "activation"
        _complete(cos, lex, via, vectors, lexical if hybrid else None, terms, q, scale)
        if fb is not None:
            fb.prepare(reached, vectors)
        for tid in reached:
            base = _fuse(cos[tid], lex.get(tid, 0.0), share)
            sims[tid] = fb.blend(base, tid) if fb is not None else base
    scored: list[Scored] = []
    for tid, sim in sims.items():
        t = traces[tid]
        f = factors(t, similarity=sim, activation=activation.get(tid, 0.0), mood=mood, now_us=now_us,
                    half_life_hours=half_life_hours)
        c = f.times(weights)
        if t.asks:
            c = c.times(_uniform(question_weight))
        scored.append((c.total(), tid, f, c))
    asleep = _Dormant.of(traces, dormant_index, dormant_lexical if hybrid else None, lexical, dormant, discussion, q, terms,
                         share, fb, limit, as_of_us, only)
    if asleep is not None:
        for tid, sim in asleep.sims.items():
            via[tid] = "superseded" if traces[tid].valid_to_us is not None else "dormant"
            cos[tid], lex[tid] = asleep.cos[tid], asleep.lex.get(tid, 0.0)
            f = factors(traces[tid], similarity=sim, activation=0.0, mood=mood, now_us=now_us, half_life_hours=half_life_hours)
            c = f.times(weights).times(_uniform(dormant.weight * (question_weight if traces[tid].asks else 1.0)))
            scored.append((c.total(), tid, f, c))
    scored.sort(key=lambda x: (-x[0], x[1]))
    considered = len(scored)
    scored = _corrections_first(scored, traces)
    if answers_of is not None:
        scored = _answers_first(scored, traces, answers_of)
    scored = _one_per_source(scored, traces, limit)
    shown = shown_texts([(traces[tid].content, traces[tid].context) for _, tid, _, _ in scored[:limit]], query)
    hits = tuple(
        _hit(rank, traces[tid], score, f, c, via[tid], now_us, cos[tid], lex.get(tid, 0.0),
             (asleep.feedback.get(tid, 0.0) if asleep is not None and tid in asleep.sims
              else fb.similarity.get(tid, 0.0) if fb is not None else 0.0),
             dormant.weight if asleep is not None and tid in asleep.sims else 1.0, shown[rank - 1])
        for rank, (score, tid, f, c) in enumerate(scored[:limit], 1)
    )
    return RecallResult(
        query=query,
        agent=book.agent,
        discussion=discussion,
        now_us=now_us,
        weights=weights,
        hits=hits,
        candidates=considered,
        mood=mood,
        hyde=outcome,
        spread=activation,
        similarity="hybrid" if hybrid else "embedding",
        keyword_share=share,
        focus=focus,
        feedback_traces=fb.traces if fb is not None else (),
        feedback_terms=fb.terms if fb is not None else (),
        feedback_share=feedback.share if fb is not None else 0.0,
        dormant_candidates=len(asleep.sims) if asleep is not None else 0,
    )


def _uniform(x: float) -> Factors:
    return Factors(**{name: x for name in Factors.__dataclass_fields__})


@dataclass
class _Dormant:
    """Step 8: the dormant candidates of one recall and their similarity, computed as for active ones."""

    sims: dict[str, float]
    cos: dict[str, float]
    lex: dict[str, float]
    feedback: dict[str, float]

    @classmethod
    def of(cls, traces: Mapping[str, MemoryTrace], index: VectorIndex | None, lexical: LexicalIndex | None,
           active_lexical: LexicalIndex | None, settings: DormantSettings, discussion: str | None, q: np.ndarray,
           terms: list[str], share: float, fb: "_Feedback | None", limit: int, as_of_us: int | None = None,
           only: TraceFilter | None = None) -> "_Dormant | None":
        if index is None or len(index) == 0 or settings.pool <= 0 or settings.weight <= 0 or limit <= 0:
            return None

        def allowed(tid: str) -> bool:  # now: the faded; as of a time: what was true then, superseded since or not
            t = traces.get(tid)
            return (t is not None and not t.active and t.in_scope(discussion)
                    and (t.valid_to_us is None if as_of_us is None else t.valid_at(as_of_us))
                    and (only is None or only.admits(t)))

        found = index.search(q, settings.pool)  # usually all in scope: a filtered search only when not
        if not all(allowed(tid) for tid, _ in found):
            found = index.search(q, settings.pool, allowed)
        cos = dict(found)
        lex = dict(lexical.search(terms, settings.pool, allowed)) if lexical is not None and share > 0 else {}
        ids = sorted(set(cos) | set(lex))
        if not ids:
            return None
        vectors = np.asarray(index.vectors(ids), dtype=np.float32)
        cos = dict(zip(ids, (vectors @ q).tolist()))
        if lexical is not None and share > 0:  # on the scale of the active traces' matches: one collection's statistics
            lex = lexical.match(terms, ids, joint=active_lexical)
        sims = {tid: _fuse(cos[tid], lex.get(tid, 0.0), share) for tid in ids}
        feedback: dict[str, float] = {}
        if fb is not None:
            fcos = dict(zip(ids, (vectors @ fb.vector).tolist()))
            fkeys = lexical.match_weighted(fb.weights, ids, joint=active_lexical) if lexical is not None and fb.weights else {}
            for tid in ids:
                feedback[tid] = _fuse(fcos[tid], fkeys.get(tid, 0.0), fb.lexical_share)
                sims[tid] = (1.0 - fb.share) * sims[tid] + fb.share * feedback[tid]
        return cls(sims, cos, lex, feedback)


@dataclass
class _Feedback:
    """The feedback query of step 3 and each candidate's similarity to it.

    Cheap by construction: the feedback vector is made of the stored vectors of the best hits (no second
    embedding) and is only compared with the candidates' stored vectors (no second vector search); the expanded
    terms go to the keyword index alone, which is where new candidates come from."""

    traces: tuple[str, ...]
    terms: tuple[str, ...]
    vector: np.ndarray
    weights: dict[str, float]
    lexical: LexicalIndex | None
    share: float  # the feedback query's share of similarity
    lexical_share: float  # its keywords' share, as for the query
    keywords: dict[str, float]
    cosine: dict[str, float] = field(default_factory=dict)
    similarity: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, sims: dict[str, float], vectors: "_Vectors", q: np.ndarray, lexical: LexicalIndex | None, terms: list[str],
           settings: FeedbackSettings, pool: int, allowed: Callable[[str], bool], via: dict[str, str],
           lexical_share: float) -> "_Feedback | None":
        """The feedback query from the best candidates of `sims`; its keyword matches join `via`. None when
        the stage is off or there is nothing to learn from."""
        if settings.traces <= 0 or settings.share <= 0 or not sims:
            return None
        top = tuple(tid for tid, _ in sorted(sims.items(), key=lambda kv: (-kv[1], kv[0]))[: settings.traces]
                    if tid in vectors)
        if not top:
            return None
        vector = _unit(q + settings.vector_weight * vectors.of(list(top)).mean(axis=0))
        weights: dict[str, float] = {}
        keywords: dict[str, float] = {}
        added: list[str] = []
        if lexical is not None and lexical_share > 0:
            added = lexical.expansion(list(top), terms, settings.terms)
            weights = {t: 1.0 for t in terms}
            weights.update({t: settings.term_weight for t in added})
            keywords = dict(lexical.search_weighted(weights, pool, allowed))
            for tid in keywords:
                via.setdefault(tid, "feedback")
        return cls(top, tuple(added), vector, weights, lexical, settings.share, lexical_share, keywords)

    def prepare(self, tids: Iterable[str], vectors: "_Vectors") -> None:
        """Each of `tids`' similarity to the feedback query (exact cosine and keyword match, in batches)."""
        todo = sorted(tid for tid in tids if tid not in self.similarity)
        vec = [tid for tid in todo if tid in vectors]
        if vec:
            self.cosine.update(zip(vec, (vectors.of(vec) @ self.vector).tolist()))
        if self.weights:
            unknown = [tid for tid in todo if tid not in self.keywords]
            if unknown and self.lexical is not None:  # weights come from the keyword index
                self.keywords.update(self.lexical.match_weighted(self.weights, unknown))
        for tid in todo:
            self.similarity[tid] = _fuse(self.cosine.get(tid, 0.0), self.keywords.get(tid, 0.0), self.lexical_share)

    def blend(self, base: float, tid: str) -> float:
        """(1 − share) · `base` (similarity to the query) + share · similarity to the feedback query."""
        return (1.0 - self.share) * base + self.share * self.similarity[tid]


class _Vectors:
    """The stored vectors of the candidates of one recall, read from the index once each, in batches."""

    def __init__(self, index: VectorIndex):
        self.index = index
        self._rows: dict[str, np.ndarray] = {}

    def __contains__(self, tid: str) -> bool:
        return tid in self._rows or tid in self.index

    def of(self, tids: list[str]) -> np.ndarray:
        """The vectors of `tids` (all in the index), one row each."""
        missing = [tid for tid in dict.fromkeys(tids) if tid not in self._rows]
        if missing:
            self._rows.update(zip(missing, np.asarray(self.index.vectors(missing), dtype=np.float32)))
        return np.stack([self._rows[tid] for tid in tids]) if tids else np.zeros((0, 0), dtype=np.float32)


def _one_per_source(scored: list[Scored], traces: Mapping[str, MemoryTrace], limit: int) -> list[Scored]:
    """The best `limit` of `scored` whose source messages are not all covered by better ones: their sources, and
    the messages of the questions they answer, which they show (step 7)."""
    out: list[Scored] = []
    covered: set[str] = set()
    for x in scored:
        t = traces[x[1]]
        source = set(t.source_message_ids) or {f"seq:{s}" for s in t.source_seqs}
        if source and source <= covered:
            continue
        covered |= source | set(t.context_message_ids)
        out.append(x)
        if len(out) >= limit:
            break
    return out


def _corrections_first(scored: list[Scored], traces: Mapping[str, MemoryTrace]) -> list[Scored]:
    """`scored` (best first) with every trace that a listed active trace contradicts moved to just after the
    last of its contradictors, so a superseded memory never outranks its correction."""
    out = list(scored)
    for _ in range(len(out)):
        ids = [x[1] for x in out]
        moved = False
        for i, x in enumerate(out):
            by = [ids.index(c) for c in traces[x[1]].contradicted_by if c in ids and traces[c].active]
            if by and max(by) > i:
                j = max(by)
                out.insert(j, out.pop(i))
                moved = True
                break
        if not moved:
            break
    return out


def _answers_first(scored: list[Scored], traces: Mapping[str, MemoryTrace],
                   answers_of: Callable[[str], list[str]]) -> list[Scored]:
    """`scored` (best first) with every trace that only asks moved to just after the best-ranked listed trace that
    answers it (step 9): a question never outranks its answer."""
    out = list(scored)
    for tid in [x[1] for x in scored if traces[x[1]].asks]:
        answers = set(answers_of(tid))
        if not answers:
            continue
        ids = [x[1] for x in out]
        i = ids.index(tid)
        j = next((k for k, a in enumerate(ids) if a in answers), -1)
        if j > i:
            out.insert(j, out.pop(i))
    return out


def _fuse(cosine: float, lexical: float, share: float) -> float:
    """Hybrid similarity: (1 − share) · cosine + share · lexical match, in [0, 1]."""
    return (1.0 - share) * max(0.0, min(1.0, cosine)) + share * lexical


def _complete(cos: dict[str, float], lex: dict[str, float], via: dict[str, str], vectors: _Vectors,
              lexical: LexicalIndex | None, terms: list[str], q: np.ndarray, scale: float = 1.0) -> None:
    """Exact cosine and lexical match for every candidate that one side found and the other did not."""
    missing = sorted(tid for tid in via if tid not in cos)
    if missing:
        have = [tid for tid in missing if tid in vectors]
        exact = (vectors.of(have) @ q).tolist() if have else []
        cos.update({tid: float(c) for tid, c in zip(have, exact)})
        for tid in missing:
            cos.setdefault(tid, 0.0)
    if lexical is not None:
        unknown = sorted(tid for tid in via if tid not in lex)
        if unknown:
            lex.update({tid: scale * m for tid, m in lexical.match(terms, unknown).items()})


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def _hit(
    rank: int, t: MemoryTrace, score: float, f: Factors, c: Factors, via: str, now_us: int, cosine: float, lexical: float,
    feedback: float = 0.0, dormant_weight: float = 1.0, shown: str = "",
) -> RecallHit:
    return RecallHit(
        rank=rank,
        trace_id=t.trace_id,
        content=t.content,
        score=score,
        factors=f,
        contributions=c,
        trace_type=t.trace_type,
        category=t.category,
        scope=t.scope,
        scope_id=t.scope_id,
        source_type=t.source_type,
        source_seqs=t.source_seqs,
        source_message_ids=t.source_message_ids,
        entities=t.entities,
        importance=t.importance,
        strength=strength_at(t, now_us),
        retrieval_count=t.retrieval_count,
        encoded_us=t.encoded_us,
        via=via,
        cosine=cosine,
        lexical=lexical,
        feedback=feedback,
        context=t.context,
        context_message_ids=t.context_message_ids,
        pruned_us=t.deleted_us if not t.active else None,
        asks=t.asks,
        valid_from_us=t.valid_from_us,
        valid_to_us=t.valid_to_us,
        superseded_by=t.superseded_by,
        dormant_weight=dormant_weight,
        shown=shown,
    )


def limit_for(requested: int | None, default_limit: int, extra_results: int) -> int:
    """The number of results: the caller's, else the configured default plus personality's extra (+2 agreeable)."""
    return requested if requested is not None else default_limit + extra_results


def override_weights(base: Factors, overrides: Mapping[str, float] | None) -> Factors:
    """The configured weights with a call's overrides (any factor name or its config alias)."""
    return weights_with(base, overrides)


@dataclass(frozen=True)
class RecallSettings:
    """What an agent's configuration says about recall (memory.retrieval, decay, rag.hyde)."""

    weights: Factors = DEFAULT_WEIGHTS
    default_limit: int = d.RECALL_DEFAULT_LIMIT
    pool: int = d.RECALL_CANDIDATE_POOL
    spreading: SpreadSettings = SpreadSettings()
    half_life_hours: float = d.RECENCY_HALF_LIFE_HOURS
    hyde: HydeSettings = HydeSettings()
    hyde_enabled: bool = False
    similarity: str = "hybrid"
    feedback: FeedbackSettings = FeedbackSettings()
    focus_common_share: float = d.QUERY_FOCUS_COMMON_SHARE
    dormant: DormantSettings = DormantSettings()
    lexical_share: float = d.SIMILARITY_LEXICAL_SHARE  # keywords' share of hybrid similarity
    question_weight: float = d.QUESTION_WEIGHT  # the factor on the composite of a trace that only asks (step 9)

    @classmethod
    def of(cls, config: AgentConfig) -> "RecallSettings":
        r = config.memory.retrieval
        w, s = r.weights, r.spreading_activation
        return cls(
            weights=Factors(
                strength=w.strength,
                similarity=w.similarity,
                recency=w.recency,
                emotional=w.emotional_congruence,
                activation=w.graph_activation,
                importance=w.importance,
            ),
            default_limit=r.default_limit,
            pool=r.candidate_pool,
            spreading=SpreadSettings(
                seeds=s.seeds, hop_decay=s.hop_decay, floor=s.floor, cap=s.cap, max_depth=s.max_depth,
                max_results=s.max_results,
            ),
            half_life_hours=config.memory.decay.recency_half_life_hours,
            hyde=HydeSettings.of(config.rag.hyde),
            hyde_enabled=config.rag.hyde.enabled,
            similarity=r.similarity,
        )
